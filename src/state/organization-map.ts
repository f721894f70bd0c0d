import type { Logger } from '../logging/logger.js';
import type { AnswerWorkers, PrimaryChannels } from '../runtime/channels.js';
import type { Clock } from '../runtime/clock.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import { OrganizationTracker, type OrganizationPresence } from './organizations.js';

/**
 * The organization map's part of the primary ⇄ worker protocol (SPEC 5.5; declared and checked in
 * `src/runtime/protocol.ts`): a worker notifies `touch` (a request served), `open` and `close` (a WebSocket);
 * the primary notifies every worker of `active` and `inactive`.
 */
const REPORT = 'primary.organization';
const NOTICE = 'worker.organization';
type Report = { kind: 'touch' | 'open' | 'close'; organization_id: string };
type Notice = { kind: 'active' | 'inactive'; organization_id: string };

export interface OrganizationMapDeps {
  channels: Pick<PrimaryChannels, 'broadcast' | 'onDisconnect'>;
  answer: AnswerWorkers;
  clock: Clock;
  /** `organizations.graceMs`: how long an organization whose last WebSocket closed stays active. */
  graceMs: number;
  log: Logger;
  events: ServerEmitter;
  /** Releases what this process caches for an organization gone inactive. */
  forget(organizationId: string): void;
}

export interface PrimaryOrganizationMap {
  tracker: OrganizationTracker;
  /** The primary's own requests and sockets (single-process mode, the fallback) count as worker 0's. */
  presence: OrganizationPresence;
}

/** The primary's side: the map fed by its workers' reports, its changes told to every worker and to the server's events. */
export function primaryOrganizationMap(deps: OrganizationMapDeps): PrimaryOrganizationMap {
  const { channels, events, log } = deps;
  const tracker = new OrganizationTracker(deps.clock, deps.graceMs, {
    active: (organization_id) => {
      events.emitSafe('organization.active', { organization_id });
      channels.broadcast(NOTICE, { kind: 'active', organization_id } satisfies Notice);
    },
    inactive: (organization_id) => {
      log.info({ organization: organization_id }, 'organization inactive');
      deps.forget(organization_id);
      events.emitSafe('organization.inactive', { organization_id });
      channels.broadcast(NOTICE, { kind: 'inactive', organization_id } satisfies Notice);
    },
  });
  deps.answer(REPORT, (params, from) => {
    const payload = params as Report;
    if (payload.kind === 'touch') tracker.touch(payload.organization_id, from.workerId);
    else if (payload.kind === 'open') tracker.socketOpened(payload.organization_id, from.workerId);
    else tracker.socketClosed(payload.organization_id, from.workerId);
  });
  channels.onDisconnect((endpoint) => tracker.workerGone(endpoint.workerId));
  return {
    tracker,
    presence: {
      touch: (organizationId) => tracker.touch(organizationId, 0),
      socketOpened: (organizationId) => tracker.socketOpened(organizationId, 0),
      socketClosed: (organizationId) => tracker.socketClosed(organizationId, 0),
      active: () => tracker.active(),
    },
  };
}

/**
 * A worker's side: each organization's first request is reported once (again after the primary said it went
 * inactive), every WebSocket open and close is; the primary's notices become this process's server events.
 */
export function workerOrganizationReports(runtime: Pick<WorkerRuntime, 'rpc'>, deps: Pick<OrganizationMapDeps, 'events' | 'forget'>): OrganizationPresence {
  const seen = new Set<string>();
  const report = (kind: Report['kind'], organization_id: string) => runtime.rpc.notify(REPORT, { kind, organization_id } satisfies Report);
  runtime.rpc.handle(NOTICE, (params) => {
    const payload = params as Notice;
    if (payload.kind === 'inactive') {
      // Report again on the next request: the primary forgot the organization with its grace period.
      seen.delete(payload.organization_id);
      deps.forget(payload.organization_id);
      deps.events.emitSafe('organization.inactive', { organization_id: payload.organization_id });
    } else {
      deps.events.emitSafe('organization.active', { organization_id: payload.organization_id });
    }
  });
  return {
    touch: (organizationId) => {
      if (seen.has(organizationId)) return;
      seen.add(organizationId);
      report('touch', organizationId);
    },
    socketOpened: (organizationId) => {
      seen.add(organizationId);
      report('open', organizationId);
    },
    socketClosed: (organizationId) => report('close', organizationId),
    active: () => [...seen],
  };
}
