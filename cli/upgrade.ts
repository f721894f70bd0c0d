import { parseArgs } from 'node:util';
import { viaHttp, viaSocket } from './ctl.js';
import { STORE_OPTIONS } from './init.js';
import { CliError, withUsage } from './usage.js';

export const UPGRADE_USAGE = `Usage: fleetplane upgrade [options]

Hand the running server over to a new primary started from the code now on disk, with no failed request:
the new primary is given the listening sockets (HTTP, HTTPS, mesh), forks its workers, and takes over once
they are all ready; the old primary then drains its workers and exits 0. Any failure before that point
(the new code does not boot, its configuration is refused, its workers are not ready within
workers.readyTimeoutMs) leaves the old primary serving, and the reason is printed. The same as SIGUSR2 on
the primary, or the envelope {"method": "restart", "master": true, "data": {"handover": true}}.

Options:
  --json             print the primary's reply as one JSON object
  --data-dir DIR     reach the server through <DIR>/control.sock (default: the configured data directory)
  --config PATH      config file used to find the data directory
  --url URL --key K  reach the server through POST <URL>/control with a platform key holding "restart"
  --timeout MS       how long to wait for the hand-over (default 120000, the longest allowed)
  -h, --help         show this help

Exit code: 0 once the new primary serves, 1 when the hand-over was refused or aborted (the old primary
still serves), 2 on bad input. See docs/upgrading.md.`;

interface HandoverReply {
  from: { pid: number; version: string };
  to: { pid: number; version: string };
  durationMs: number;
}

export async function upgrade(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const options = { ...STORE_OPTIONS, url: { type: 'string' }, key: { type: 'string' }, timeout: { type: 'string' } } as const;
  const { values } = withUsage(UPGRADE_USAGE, () => parseArgs({ args: argv, options, strict: true }));
  if (values.help) {
    out.write(`${UPGRADE_USAGE}\n`);
    return;
  }
  const timeoutMs = values.timeout === undefined ? 120_000 : Number(values.timeout);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 120_000) throw new CliError('--timeout takes milliseconds between 1 and 120000', 2);
  if (Boolean(values.url) !== Boolean(values.key)) throw new CliError('--url and --key go together', 2);
  const envelope = { method: 'restart', master: true, data: { handover: true } };
  const result = values.url ? await viaHttp(values.url, values.key!, envelope, timeoutMs) : await viaSocket(values, envelope, timeoutMs);
  if (values.json) out.write(`${JSON.stringify(result)}\n`);
  const [reply] = result.replies;
  if (!reply) throw new CliError(`the primary did not answer within ${timeoutMs} ms (the hand-over may still be running: see "fleetplane status")`, 1);
  if (!reply.ok) throw new CliError(`${reply.error?.code ?? 'error'}: ${reply.error?.message ?? 'the hand-over failed'}`, 1);
  const handed = reply.result as HandoverReply;
  if (!values.json) out.write(`${reply.server}: handed over from pid ${handed.from.pid} (${handed.from.version}) to pid ${handed.to.pid} (${handed.to.version}) in ${handed.durationMs} ms\n`);
}
