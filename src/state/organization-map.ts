import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { Logger } from '../logging/logger.js';
import type { PrimaryChannels } from '../runtime/channels.js';
import type { Clock } from '../runtime/clock.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import { OrganizationTracker, type OrganizationPresence } from './organizations.js';

/**
 * The organization map's wire protocol (SPEC 5.5), on the channel `org`: a worker reports `touch` (a request
 * served), `open` and `close` (a WebSocket); the primary answers every worker with `active` and `inactive`.
 * Anything else on the channel is dropped at the receiving side.
 */
const ORG_CHANNEL = 'org';
const WorkerReport = Type.Object({ kind: Type.Union([Type.Literal('touch'), Type.Literal('open'), Type.Literal('close')]), organization_id: Type.String({ minLength: 1, maxLength: 128 }) });
const PrimaryNotice = Type.Object({ kind: Type.Union([Type.Literal('active'), Type.Literal('inactive')]), organization_id: Type.String() });

export interface OrganizationMapDeps {
  channels: PrimaryChannels;
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
      channels.broadcast(ORG_CHANNEL, { kind: 'active', organization_id });
    },
    inactive: (organization_id) => {
      log.info({ organization: organization_id }, 'organization inactive');
      deps.forget(organization_id);
      events.emitSafe('organization.inactive', { organization_id });
      channels.broadcast(ORG_CHANNEL, { kind: 'inactive', organization_id });
    },
  });
  channels.on(ORG_CHANNEL, (from, payload) => {
    if (!Value.Check(WorkerReport, payload)) return channels.refuse(from, 'org', 'malformed organization report');
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
export function workerOrganizationReports(runtime: Pick<WorkerRuntime, 'sendChannel' | 'onChannel'>, deps: Pick<OrganizationMapDeps, 'events' | 'forget'>): OrganizationPresence {
  const seen = new Set<string>();
  const report = (kind: 'touch' | 'open' | 'close', organization_id: string) => runtime.sendChannel(ORG_CHANNEL, { kind, organization_id });
  runtime.onChannel(ORG_CHANNEL, (payload) => {
    if (!Value.Check(PrimaryNotice, payload)) return;
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
