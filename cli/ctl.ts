import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config/load.js';
import { callControlSocket, controlSocketPath } from '../src/control/socket.js';
import { IpcError, parseEnvelope } from '../src/ipc/envelope.js';
import type { RequestResult } from '../src/ipc/handlers.js';
import { CliError, usageError } from './usage.js';
import { describeReplies } from './replies.js';

export const CTL_USAGE = `Usage: fleetplane ctl <method> [targets] [options]

Send a control envelope to a running server and print the replies: a table for status and scale status
(memory in MiB, times in s/min/h), one line per process for other methods, then a line per target that failed,
does not exist or did not answer.

Targets (at least one):
  --server ID        a server (repeatable)
  --worker N...      worker numbers: --worker 1 2, --worker 1 --worker 2 or --worker 1,2
  --master           the primary
  --broadcast        every worker (of every server when no --server is given)
  --org ID           only workers serving this organization

Options:
  --value JSON       the method's argument (envelope "data"), e.g. --value true or --value '["org-1"]'
  --confirm ID       the server id, required by reboot and shutdown
  --timeout MS       how long to wait for replies (default 5000)
  --json             print the result as one JSON object (for scripts): replies, missing, unknownWorkers
  --data-dir DIR     reach the server through <DIR>/control.sock (default: the configured data directory)
  --config PATH      config file used to find the data directory
  --url URL --key K  reach the server through POST <URL>/control with a key instead
  -h, --help         show this help

Methods: status, cordon, drain, shed, restart, reboot, shutdown, and any registered with server.handle().
  scale status|pause|resume   the autoscaler (default target: --master); pause and resume act on the
                              whole cluster (its document); the deciding server's status says "deciding": true
  tls reload                  reload the HTTPS and mesh certificates from their files (default target:
                              --master); a pair that cannot serve is refused with the reason, nothing changes
  tls revoke SERIAL           mesh.tls.mode "auto": peers presenting the mesh certificate of this serial (hex)
                              are refused by every server of the cluster from their next handshake

Exit code: 0 when every target answered ok, 1 when one failed or was missing, 2 on bad input.`;

const SCALE_COMMANDS = ['status', 'pause', 'resume'];
const TARGET_FLAGS = ['--server', '--worker', '--master', '--broadcast', '--org'];

/**
 * `ctl scale <status|pause|resume> [targets]` is `ctl autoscaler.<command>`, sent to the primary unless a
 * target is given: the autoscaler runs in the primary.
 */
export function scaleArgv(argv: string[]): string[] {
  if (argv[0] !== 'scale') return argv;
  const [, command, ...rest] = argv;
  if (!command || !SCALE_COMMANDS.includes(command)) throw new CliError(`"ctl scale" takes ${SCALE_COMMANDS.join(', ')}, got ${command ? `"${command}"` : 'nothing'}`, 2, CTL_USAGE);
  return toPrimaryByDefault(`autoscaler.${command}`, rest);
}

/** `method` with `rest`, and `--master` unless `rest` names a target. */
function toPrimaryByDefault(method: string, rest: string[]): string[] {
  const targeted = rest.some((arg) => TARGET_FLAGS.some((flag) => arg === flag || arg.startsWith(`${flag}=`)));
  return [method, ...rest, ...(targeted ? [] : ['--master'])];
}

/**
 * `ctl tls reload [targets]` is `ctl tls.reload`, and `ctl tls revoke SERIAL [targets]` is `ctl tls.revoke --value
 * '"SERIAL"'`, sent to the primary unless a target is given: it holds the certificates.
 */
export function tlsArgv(argv: string[]): string[] {
  if (argv[0] !== 'tls') return argv;
  const [, command, ...rest] = argv;
  if (command === 'reload') return toPrimaryByDefault('tls.reload', rest);
  if (command !== 'revoke') throw new CliError(`"ctl tls" takes reload or revoke, got ${command ? `"${command}"` : 'nothing'}`, 2, CTL_USAGE);
  const [serial, ...targets] = rest;
  if (!serial || serial.startsWith('-')) throw new CliError('"ctl tls revoke" takes the serial of a mesh certificate (hex), e.g. ctl tls revoke 5A0D19B0', 2, CTL_USAGE);
  return toPrimaryByDefault('tls.revoke', ['--value', JSON.stringify(serial), ...targets]);
}

const WORKER_FORMS = '--worker 1 2, --worker 1 --worker 2 or --worker 1,2';

/**
 * `--worker 1 2` as the usage writes it: the numbers after a `--worker N` belong to it (a method is never a bare
 * number), as do `--worker 1,2` and `--worker=1`. Anything else after `--worker` is one line with the forms.
 */
export function workerArgv(argv: string[]): string[] {
  const out: string[] = [];
  const numbers = (raw: string | undefined) => {
    if (raw === undefined || !/^\d+(,\d+)*$/.test(raw)) throw new CliError(`--worker takes worker numbers (${WORKER_FORMS}), got ${raw === undefined ? 'nothing' : `"${raw}"`}`, 2);
    for (const number of raw.split(',')) out.push('--worker', number);
  };
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    if (arg === '--') {
      out.push(...argv.slice(index));
      break;
    }
    if (arg !== '--worker' && !arg.startsWith('--worker=')) {
      out.push(arg);
      continue;
    }
    numbers(arg === '--worker' ? argv[++index] : arg.slice('--worker='.length));
    while (/^\d+$/.test(argv[index + 1] ?? '')) numbers(argv[++index]);
  }
  return out;
}

export async function ctl(argv: string[]): Promise<void> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(workerArgv(tlsArgv(scaleArgv(argv))));
  } catch (error) {
    throw error instanceof CliError ? error : usageError(error, CTL_USAGE);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${CTL_USAGE}\n`);
    return;
  }
  if (positionals.length !== 1) throw new CliError('give exactly one method, e.g. "fleetplane ctl status --broadcast"', 2, CTL_USAGE);
  let data: unknown;
  if (values.value !== undefined) {
    try {
      data = JSON.parse(values.value);
    } catch {
      throw new CliError(`--value is not JSON: ${values.value}`, 2);
    }
  }
  const numbers = (values.worker ?? []).map(Number);
  const envelope: Record<string, unknown> = { method: positionals[0] };
  if (values.server?.length) envelope.server = values.server.length === 1 ? values.server[0] : values.server;
  if (numbers.length) envelope.worker = numbers.length === 1 ? numbers[0] : numbers;
  if (values.master) envelope.master = true;
  if (values.broadcast) envelope.broadcast = true;
  if (values.org) envelope.organization_id = values.org;
  if (values.confirm) envelope.confirm = values.confirm;
  if (data !== undefined) envelope.data = data;
  const timeoutMs = values.timeout === undefined ? 5_000 : Number(values.timeout);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 120_000) throw new CliError('--timeout takes milliseconds between 1 and 120000', 2);
  try {
    parseEnvelope(envelope);
  } catch (error) {
    if (error instanceof IpcError) throw new CliError(error.message, 2);
    throw error;
  }
  if (!['server', 'worker', 'master', 'broadcast', 'organization_id'].some((field) => field in envelope)) {
    throw new CliError('the envelope names no target: give --server, --worker, --master, --broadcast or --org', 2, CTL_USAGE);
  }
  if (Boolean(values.url) !== Boolean(values.key)) throw new CliError('--url and --key go together', 2);

  const result = values.url ? await viaHttp(values.url, values.key!, envelope, timeoutMs) : await viaSocket(values, envelope, timeoutMs);
  print(envelope.method as string, result, Boolean(values.json));
  if (result.missing.length > 0 || result.replies.some((reply) => !reply.ok)) process.exitCode = 1;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      server: { type: 'string', multiple: true },
      worker: { type: 'string', multiple: true },
      master: { type: 'boolean' },
      broadcast: { type: 'boolean' },
      org: { type: 'string' },
      value: { type: 'string' },
      confirm: { type: 'string' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
      url: { type: 'string' },
      key: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

export async function viaSocket(values: { config?: string; 'data-dir'?: string }, envelope: unknown, timeoutMs: number): Promise<RequestResult> {
  const { config } = loadConfig({ flags: { config: values.config, dataDir: values['data-dir'] } });
  let response;
  try {
    response = await callControlSocket(controlSocketPath(config.dataDir), { envelope, timeoutMs }, timeoutMs + 5_000);
  } catch (error) {
    throw new CliError((error as Error).message, 1);
  }
  if (!response.ok) throw new CliError(`${response.error.code}: ${response.error.message}`, response.error.status < 500 ? 2 : 1);
  return response.result;
}

export async function viaHttp(url: string, key: string, envelope: unknown, timeoutMs: number): Promise<RequestResult> {
  let response: Response;
  try {
    response = await fetch(new URL('/control', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ ...(envelope as object), timeoutMs }),
      signal: AbortSignal.timeout(timeoutMs + 5_000),
    });
  } catch (error) {
    throw new CliError(`cannot reach ${url}: ${(error as Error).message}`, 1);
  }
  const body = (await response.json().catch(() => undefined)) as (RequestResult & { error?: { code: string; message: string } }) | undefined;
  if (!response.ok || !body) throw new CliError(`${response.status} ${body?.error?.code ?? ''}: ${body?.error?.message ?? response.statusText}`, response.status < 500 ? 2 : 1);
  return body;
}

function print(method: string, result: RequestResult, json: boolean): void {
  process.stdout.write(`${json ? JSON.stringify(result) : describeReplies(method, result)}\n`);
}
