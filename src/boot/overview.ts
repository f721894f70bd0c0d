import { hostname } from 'node:os';
import type { ServerIdentity, Envelopes } from '../server.js';
import type { Store } from '../db/types.js';
import type { OrganizationDocument } from '../db/documents.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import type { ServerState } from '../state/state.js';
import type { OrganizationTracker } from '../state/organizations.js';
import type { MeshEvents } from '../mesh/events.js';
import { systemClock } from '../runtime/clock.js';
import { lazyCheck } from '../schema/lazy-check.js';
import { packageFacts } from '../package.js';
import { EventJournal } from '../overview/journal.js';
import { autoscalerEntry, meshLinkEntry, recordServerEvents, shedEntry, type AutoscalerNotice } from '../overview/entries.js';
import { ServerOverview } from '../overview/service.js';
import { WorkerFiguresSchema, type WorkerFigures } from '../overview/schema.js';
import { registerOverviewHandlers, registerWorkerFigures } from '../overview/handlers.js';
import { OVERVIEW_EMIT } from '../overview/subscribers.js';

const figuresCheck = lazyCheck(WorkerFiguresSchema);
/** How long the primary waits for its workers' figures: a worker slower than this is shown without them. */
const GATHER_TIMEOUT_MS = 2_000;

export interface PrimaryOverviewDeps {
  identity: ServerIdentity;
  events: ServerEmitter;
  primary: PrimaryRuntime;
  state: ServerState;
  presence: OrganizationTracker['describe'];
  mesh: { on<E extends keyof MeshEvents>(event: E, listener: (...args: MeshEvents[E]) => void): unknown };
  db: Store;
  platformOrganization(): Promise<string | null>;
  envelopes: Envelopes;
  autoscaler?: { status(): Promise<unknown> };
}

/**
 * The primary's overview (the dashboard's data): the journal of this server's events, fed by supervision, shed
 * changes, mesh links and autoscaler notices, and sent as it grows to the workers serving the platform
 * organization (here and on peers), which hand it to their subscribed sockets; the snapshot service and its
 * envelope methods.
 */
export function openPrimaryOverview(deps: PrimaryOverviewDeps): ServerOverview {
  const { identity, events, primary, state, envelopes } = deps;
  const { id, config, log } = identity;
  const journal = new EventJournal(id, () => systemClock.now());
  recordServerEvents(events, journal);
  state.onShedChange((organizations) => journal.append(shedEntry(organizations)));
  deps.mesh.on('link:open', (link) => journal.append(meshLinkEntry(link, true)));
  deps.mesh.on('link:close', (link) => journal.append(meshLinkEntry(link, false)));
  events.on('autoscaler:action', (notice: AutoscalerNotice) => journal.append(autoscalerEntry(notice)));
  journal.onAppend((entry) => {
    void deps
      .platformOrganization()
      .then((organization_id) => (organization_id ? envelopes.send({ method: OVERVIEW_EMIT, organization_id, data: entry }) : undefined))
      .catch((error: unknown) => log.debug({ err: error }, 'overview event not sent to the dashboards'));
  });

  const overview = new ServerOverview({
    serverId: id,
    cluster: config.server.cluster,
    host: hostname(),
    version: packageFacts()?.version ?? 'unknown',
    clock: systemClock,
    startedAt: primary.startedAt,
    status: () => primary.status,
    ready: () => primary.getHealth().ready,
    fleet: () => primary.getFleetHealth(),
    primaryRssBytes: () => process.memoryUsage.rss(),
    gatherWorkers: async () => {
      const result = await envelopes.request({ method: 'overview.worker', server: id, broadcast: true }, GATHER_TIMEOUT_MS);
      return result.replies.flatMap((reply) => (reply.ok && figuresCheck.Check(reply.result) ? [reply.result] : []));
    },
    shed: () => state.shedding,
    organizations: deps.presence,
    ...(deps.autoscaler ? { autoscaler: () => deps.autoscaler!.status() } : {}),
    journal,
  });
  overview.observe(events);
  registerOverviewHandlers((method, handler) => envelopes.handle(method, handler), {
    serverId: id,
    cluster: config.server.cluster,
    overview,
    journal,
    request: (envelope, timeoutMs) => envelopes.request(envelope, timeoutMs),
    organizationNames: async (ids) => {
      const found = await deps.db.collection<OrganizationDocument>('organizations').find({ _id: { $in: ids } });
      return Object.fromEntries(found.map((organization) => [organization._id, organization.name]));
    },
  });
  return overview;
}

/** A worker's (and a single-process primary's) part: the figures only it knows. */
export function workerOverview(handle: Envelopes['handle'], runtime: WorkerRuntime): void {
  registerWorkerFigures(handle, (): WorkerFigures => ({ ...runtime.describe(), requests: runtime.httpMetrics.answered }));
}
