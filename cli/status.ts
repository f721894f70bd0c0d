import type { RequestResult } from '../src/ipc/handlers.js';
import { viaHttp, viaSocket } from './ctl.js';
import { STORE_OPTIONS, withUsage } from './init.js';
import { CliError } from './usage.js';
import { table } from './table.js';
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

interface ProcessStatus {
  server: string;
  worker: number;
  pid: number;
  status: string;
  uptimeMs: number;
  connections: number;
  rssBytes?: number;
  /** The primary's: the version it runs and when it started (both change with a hand-over). */
  version?: string;
  startedAt?: string;
}

/** `93 s`, `12 min`, `3.5 h`, `2.1 d`: the unit a person reads at a glance. */
export function formatUptime(ms: number): string {
  const s = ms / 1000;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86_400).toFixed(1)} d`;
}

export function statusTable(result: RequestResult): string {
  const rows: string[][] = [];
  const replies = [...result.replies].sort((a, b) => a.server.localeCompare(b.server) || a.worker - b.worker);
  for (const reply of replies) {
    const process = reply.worker === 0 ? 'primary' : `worker ${reply.worker}`;
    if (!reply.ok) {
      rows.push([reply.server, process, '-', `error: ${reply.error?.code}`, '-', '-', '-', '-', '-']);
      continue;
    }
    const status = reply.result as ProcessStatus;
    const rss = status.rssBytes === undefined ? '-' : `${Math.round(status.rssBytes / 1024 / 1024)} MiB`;
    const started = status.startedAt ? status.startedAt.replace(/\.\d+Z$/, 'Z') : '-';
    rows.push([reply.server, process, String(status.pid), status.status, status.version ?? '-', started, formatUptime(status.uptimeMs), String(status.connections), rss]);
  }
  for (const missing of result.missing) rows.push([missing.server, missing.worker === undefined ? '-' : missing.worker === 0 ? 'primary' : `worker ${missing.worker}`, '-', 'no answer', '-', '-', '-', '-', '-']);
  return table(['SERVER', 'PROCESS', 'PID', 'STATE', 'VERSION', 'STARTED', 'UPTIME', 'CONNECTIONS', 'RSS'], rows, new Set([2, 6, 7, 8]));
}

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
