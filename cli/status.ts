import { viaHttp, viaSocket } from './ctl.js';
import { STORE_OPTIONS, withUsage } from './init.js';
import { CliError } from './usage.js';
import { statusTable } from './replies.js';
import { parseArgs } from 'node:util';

export const STATUS_USAGE = `Usage: fleetplane status [options]

A table of the running server's processes (and its mesh peers'): server, process, pid, state, the
primary's version and start time, uptime, open connections and memory (RSS).

Options:
  --json             print the replies as one JSON object
  --data-dir DIR     reach the server through <DIR>/control.sock (default: the configured data directory)
  --config PATH      config file used to find the data directory
  --url URL --key K  reach the server through POST <URL>/control with a platform key instead
  --timeout MS       how long to wait for replies (default 5000)
  -h, --help         show this help

Exit code: 0 when every process answered, 1 when one did not, 2 on bad input.`;

export async function status(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const options = { ...STORE_OPTIONS, url: { type: 'string' }, key: { type: 'string' }, timeout: { type: 'string' } } as const;
  const { values } = withUsage(STATUS_USAGE, () => parseArgs({ args: argv, options, strict: true }));
  if (values.help) {
    out.write(`${STATUS_USAGE}\n`);
    return;
  }
  const timeoutMs = values.timeout === undefined ? 5_000 : Number(values.timeout);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 120_000) throw new CliError('--timeout takes milliseconds between 1 and 120000', 2);
  if (Boolean(values.url) !== Boolean(values.key)) throw new CliError('--url and --key go together', 2);
  const envelope = { method: 'status', master: true, broadcast: true };
  const result = values.url ? await viaHttp(values.url, values.key!, envelope, timeoutMs) : await viaSocket(values, envelope, timeoutMs);
  out.write(values.json ? `${JSON.stringify(result)}\n` : `${statusTable(result)}\n`);
  if (result.missing.length > 0 || result.replies.some((reply) => !reply.ok)) process.exitCode = 1;
}
