import type { RequestResult, TargetReply } from '../src/ipc/handlers.js';
import { table } from './table.js';
import { isAcceptedAfterGrace } from '../src/runtime/readiness-grace.js';

/**
 * What `ctl` and `status` print for people: a table for the methods whose answers are figures (`status`,
 * `autoscaler.status`), one line per process otherwise; then one line per target that failed, does not exist or
 * did not answer. `--json` prints the result itself instead.
 */

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

interface ScaleStatus {
  paused: boolean;
  deciding: boolean;
  lease: { owner: string; term: number; expiresAt: string } | null;
  policy?: { minClusterSize: number; maxClusterSize: number; cooldownMs: number; windowMs: number };
  lastDecision?: { action: string; reason: string; current: number; desired: number; serverId?: string };
  lastAction?: { action: string; reason: string; serverId?: string; at: number; outcome?: string; error?: string };
  samples: number;
  evaluations: number;
}

/** `93 s`, `12 min`, `3.5 h`, `2.1 d`: the unit a person reads at a glance. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86_400).toFixed(1)} d`;
}

const mebibytes = (bytes: number | undefined) => (bytes === undefined ? '-' : `${Math.round(bytes / 1024 / 1024)} MiB`);
const processOf = (worker: number | undefined) => (worker === undefined ? '-' : worker === 0 ? 'primary' : `worker ${worker}`);
const byProcess = (a: TargetReply, b: TargetReply) => a.server.localeCompare(b.server) || a.worker - b.worker;

/** The table of `fleetplane status` and `ctl status`: a row per process, failures and silences included. */
export function statusTable(result: RequestResult): string {
  const rows: string[][] = [];
  for (const reply of [...result.replies].sort(byProcess)) {
    const process = processOf(reply.worker);
    if (!reply.ok) {
      rows.push([reply.server, process, '-', `error: ${reply.error?.code}`, '-', '-', '-', '-', '-']);
      continue;
    }
    const status = reply.result as ProcessStatus;
    const started = status.startedAt ? status.startedAt.replace(/\.\d+Z$/, 'Z') : '-';
    rows.push([reply.server, process, String(status.pid), status.status, status.version ?? '-', started, formatDuration(status.uptimeMs), String(status.connections), mebibytes(status.rssBytes)]);
  }
  for (const missing of silent(result)) rows.push([missing.server, processOf(missing.worker), '-', 'no answer', '-', '-', '-', '-', '-']);
  return table(['SERVER', 'PROCESS', 'PID', 'STATE', 'VERSION', 'STARTED', 'UPTIME', 'CONNECTIONS', 'RSS'], rows, new Set([2, 6, 7, 8]));
}

const yesNo = (value: boolean) => (value ? 'yes' : 'no');

function scaleRow(server: string, status: ScaleStatus, now: number): string[] {
  const { policy, lastDecision, lastAction, lease } = status;
  const decision = lastDecision ? `${lastDecision.action}${lastDecision.serverId ? ` ${lastDecision.serverId}` : ''} (${lastDecision.reason})` : 'none yet';
  const action = lastAction
    ? `${lastAction.action}${lastAction.serverId ? ` ${lastAction.serverId}` : ''}: ${lastAction.outcome ?? 'running'}, ${formatDuration(now - lastAction.at)} ago`
    : 'none';
  const leaseText = lease ? `${lease.owner} (${Date.parse(lease.expiresAt) > now ? `${formatDuration(Date.parse(lease.expiresAt) - now)} left` : 'expired'})` : 'none';
  const policyText = policy ? `${policy.minClusterSize}–${policy.maxClusterSize} servers, window ${formatDuration(policy.windowMs)}, cooldown ${formatDuration(policy.cooldownMs)}` : 'none';
  const size = lastDecision ? String(lastDecision.current) : '-';
  const desired = lastDecision ? String(lastDecision.desired) : '-';
  return [server, yesNo(status.deciding), yesNo(status.paused), size, desired, decision, action, leaseText, policyText];
}

/** `ctl scale status`: a row per server that answered, its figures in seconds and minutes. */
export function scaleTable(replies: readonly TargetReply[], now = Date.now()): string {
  const rows = [...replies].sort(byProcess).map((reply) => scaleRow(reply.server, reply.result as ScaleStatus, now));
  return table(['SERVER', 'DECIDES', 'PAUSED', 'SIZE', 'DESIRED', 'LAST DECISION', 'LAST ACTION', 'LEASE', 'POLICY'], rows, new Set([3, 4]));
}

/** A reply's result on one line: `status=cordoned worker=1` for a flat object, JSON for what nests. */
export function describeResult(result: unknown): string {
  // A cordon or drain waiting for the readiness grace was accepted: said as a person would, not as fields.
  if (isAcceptedAfterGrace(result)) return `accepted: takes effect after the readiness grace (${formatDuration(result.effectiveInMs)})`;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return JSON.stringify(result) ?? String(result);
  const fields = Object.entries(result as Record<string, unknown>).map(([key, value]) => {
    const text = typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
    return `${key}=${text}`;
  });
  return fields.length > 0 ? fields.join(' ') : '{}';
}

/** Targets missing for no stated reason (those with one are said by `unknownWorkers`). */
function silent(result: RequestResult): RequestResult['missing'] {
  const unknown = new Set((result.unknownWorkers ?? []).map((entry) => `${entry.server}/${entry.worker}`));
  return result.missing.filter((missing) => !unknown.has(`${missing.server}/${missing.worker}`));
}

/** The lines after a table (or alone): failures, workers that do not exist, targets that did not answer. */
function problemLines(result: RequestResult, withFailures: boolean): string[] {
  const lines: string[] = [];
  if (withFailures) {
    for (const reply of [...result.replies].sort(byProcess)) {
      if (!reply.ok) lines.push(`${reply.server} ${processOf(reply.worker)}: error ${reply.error?.code}: ${reply.error?.message}`);
    }
  }
  for (const unknown of result.unknownWorkers ?? []) lines.push(`${unknown.server}: ${unknown.message}`);
  for (const missing of silent(result)) lines.push(`${missing.server}${missing.worker === undefined ? '' : ` ${processOf(missing.worker)}`}: no answer`);
  return lines;
}

/** What `ctl <method>` prints for people. */
export function describeReplies(method: string, result: RequestResult, now = Date.now()): string {
  const answered = result.replies.filter((reply) => reply.ok);
  if (method === 'status' && answered.length > 0) {
    // The status table has a row for each failure and silence already; only a worker that does not exist is added.
    return [statusTable(result), ...(result.unknownWorkers ?? []).map((unknown) => `${unknown.server}: ${unknown.message}`)].join('\n');
  }
  const lines: string[] = [];
  if (method === 'autoscaler.status' && answered.length > 0) lines.push(scaleTable(answered, now));
  else for (const reply of [...answered].sort(byProcess)) lines.push(`${reply.server} ${processOf(reply.worker)}: ${describeResult(reply.result)}`);
  return [...lines, ...problemLines(result, true)].join('\n');
}
