import type { ServerEmitter, ServerEvents } from '../runtime/events.js';
import type { EventJournal, FleetEventInput } from './journal.js';

/** Where the journal listens: the server's events. */
export type JournalSources = Pick<ServerEmitter, 'on'>;

/** An autoscaler action or a pause of the cluster, as the autoscaler's composition announces it. */
export interface AutoscalerNotice {
  action: string;
  reason?: string;
  target?: string;
}

const exitOf = (code: number | null, signal: string | null) => (signal ? `signal ${signal}` : `exit code ${code ?? 'unknown'}`);

/** The journal entry each recorded server event becomes; undefined for those the journal leaves out. */
export const ENTRY_OF: { [E in keyof ServerEvents]?: (payload: ServerEvents[E]) => FleetEventInput } = {
  status_change: ({ worker, oldStatus, newStatus }) => ({
    kind: 'status',
    ...(worker === undefined ? {} : { worker }),
    message: `${worker === undefined ? 'server' : `worker ${worker}`}: ${oldStatus} → ${newStatus}`,
  }),
  'worker:crash': ({ workerId, pid, code, signal, bootFailure }) => ({
    kind: 'crash',
    worker: workerId,
    message: `worker ${workerId} (pid ${pid}) ${bootFailure ? 'failed to boot' : 'crashed'}: ${exitOf(code, signal)}`,
  }),
  'worker:restart': ({ workerId, pid, attempt, delayMs }) => ({
    kind: 'restart',
    worker: workerId,
    message: `worker ${workerId} restarted as pid ${pid} (attempt ${attempt}, after ${Math.round(delayMs)} ms)`,
  }),
  'worker:recycle': ({ workerId, pid, reason }) => ({ kind: 'recycle', worker: workerId, message: `worker ${workerId} (pid ${pid}) recycled: ${reason}` }),
  'worker:wedged': ({ workerId, pid, silentMs }) => ({ kind: 'recycle', worker: workerId, message: `worker ${workerId} (pid ${pid}) wedged: silent for ${Math.round(silentMs)} ms` }),
  'worker:quarantined': ({ workerId, consecutiveBootFailures }) => ({
    kind: 'quarantine',
    worker: workerId,
    message: `worker ${workerId} quarantined after ${consecutiveBootFailures} boot failures in a row`,
  }),
  'fleet:degraded': ({ target, active }) => ({ kind: 'capacity', message: `degraded: ${active} of ${target} workers serve` }),
  'fleet:recovered': ({ target, degradedDurationMs }) => ({ kind: 'capacity', message: `recovered: ${target} of ${target} workers serve after ${Math.round(degradedDurationMs / 1000)} s` }),
  'circuit-breaker:tripped': ({ count, windowMs }) => ({ kind: 'breaker', message: `circuit breaker tripped: ${count} crashes in ${Math.round(windowMs / 1000)} s; restarts stopped` }),
  'restart:start': ({ workers, reason }) => ({ kind: 'rolling', message: `rolling restart of ${workers.length} workers started (${reason})` }),
  'restart:complete': ({ workers, durationMs }) => ({ kind: 'rolling', message: `rolling restart of ${workers.length} workers done in ${Math.round(durationMs / 1000)} s` }),
  'shutdown:start': ({ signal }) => ({ kind: 'shutdown', message: `shutting down (${signal})` }),
  'organization.active': ({ organization_id }) => ({ kind: 'organization', message: `organization ${organization_id} active` }),
  'organization.inactive': ({ organization_id }) => ({ kind: 'organization', message: `organization ${organization_id} inactive` }),
};

/** Records every server event of `ENTRY_OF` in the journal as it is emitted. */
export function recordServerEvents(source: JournalSources, journal: EventJournal): void {
  for (const name of Object.keys(ENTRY_OF) as Array<keyof ServerEvents>) {
    const entryOf = ENTRY_OF[name] as (payload: unknown) => FleetEventInput;
    source.on(name, (payload: unknown) => journal.append(entryOf(payload)));
  }
}

export function shedEntry(organizations: ReadonlySet<string>): FleetEventInput {
  return { kind: 'shed', message: organizations.size > 0 ? `shedding ${[...organizations].join(', ')}` : 'shedding ended' };
}

export function meshLinkEntry(link: { peer: string; direction: 'in' | 'out'; code?: number; reason?: string }, open: boolean): FleetEventInput {
  if (open) return { kind: 'mesh', message: `mesh link to ${link.peer} up (${link.direction === 'in' ? 'dialed by it' : 'dialed'})` };
  return { kind: 'mesh', message: `mesh link to ${link.peer} down (code ${link.code ?? 'none'}${link.reason ? `: ${link.reason}` : ''})` };
}

export function autoscalerEntry(notice: AutoscalerNotice): FleetEventInput {
  const parts = [`autoscaler: ${notice.action}`, notice.target ? ` ${notice.target}` : '', notice.reason ? ` (${notice.reason})` : ''];
  return { kind: 'autoscaler', message: parts.join('') };
}
