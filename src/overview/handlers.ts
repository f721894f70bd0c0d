import type { TSchema, Static } from '@sinclair/typebox';
import { lazyCheck, type SchemaCheck } from '../schema/lazy-check.js';
import { IpcError } from '../ipc/envelope.js';
import type { IpcHandler, RequestResult } from '../ipc/handlers.js';
import type { EventJournal } from './journal.js';
import type { ServerOverview } from './service.js';
import { ClusterQuerySchema, EventsQuerySchema, ServerQuerySchema, ServerSummarySchema, type ServerSummary, type WorkerFigures } from './schema.js';

type Handle = (method: string, handler: IpcHandler) => void;

const serverQuery = lazyCheck(ServerQuerySchema);
const eventsQuery = lazyCheck(EventsQuerySchema);
const clusterQuery = lazyCheck(ClusterQuerySchema);
const summaryCheck = lazyCheck(ServerSummarySchema);

/** `data` checked against the method's schema (absent means `{}`); a mismatch is a 400 naming the field. */
function argument<T extends TSchema>(method: string, check: SchemaCheck<T>, data: unknown): Static<T> {
  const value = data === undefined || data === null ? {} : data;
  if (check.Check(value)) return value;
  const error = check.Errors(value).First();
  const field = error?.path.replace(/^\//, '').replace(/\//g, '.') || 'data';
  throw new IpcError('bad_request', `${method}: ${field}: ${error?.message ?? 'invalid'}`, 'data');
}

export interface OverviewHandlerDeps {
  serverId: string;
  cluster: string;
  overview: ServerOverview;
  journal: EventJournal;
  request(envelope: unknown, timeoutMs?: number): Promise<RequestResult>;
  /** Display names of these organizations, where the store has them. */
  organizationNames(ids: string[]): Promise<Record<string, string>>;
}

/** The cluster as the Cluster view shows it: every server's summary, gathered through the mesh. */
export interface ClusterOverview {
  cluster: string;
  /** The server that answered this. */
  via: string;
  servers: ServerSummary[];
  /** Servers that answered with an error, or with a summary this server cannot read. */
  failed: Array<{ server: string; error: string }>;
  /** Servers that did not answer in time. */
  missing: string[];
  /** The autoscaler's deciding server, when one of the answers says it decides. */
  deciding: string | null;
  organizationNames: Record<string, string>;
}

/**
 * The primary's overview methods (server-level: platform keys holding them, SPEC 8.4):
 * `overview.server` (this server, its processes and, with `historySince`, their recent figures),
 * `overview.cluster` (every server's summary through the mesh) and `overview.events` (this server's journal
 * after the entry numbers given).
 */
export function registerOverviewHandlers(handle: Handle, deps: OverviewHandlerDeps): void {
  handle('overview.server', (data) => deps.overview.snapshot(argument('overview.server', serverQuery, data)));

  handle('overview.events', (data) => {
    const query = argument('overview.events', eventsQuery, data);
    const since = typeof query.since === 'number' ? query.since : (query.since?.[deps.serverId] ?? 0);
    return { server: deps.serverId, latest: deps.journal.latest, events: deps.journal.since(since, query.limit) };
  });

  handle('overview.cluster', async (data): Promise<ClusterOverview> => {
    const { timeoutMs = 3_000 } = argument('overview.cluster', clusterQuery, data);
    const result = await deps.request({ method: 'overview.server', cluster: deps.cluster, master: true, data: { processes: false } }, timeoutMs);
    const servers: ServerSummary[] = [];
    const failed: ClusterOverview['failed'] = [];
    for (const reply of result.replies) {
      if (reply.ok && summaryCheck.Check(reply.result)) servers.push(reply.result);
      else failed.push({ server: reply.server, error: reply.ok ? 'the summary is not readable' : `${reply.error?.code}: ${reply.error?.message}` });
    }
    servers.sort((a, b) => a.server.localeCompare(b.server));
    const deciding = servers.find((entry) => (entry.autoscaler as { deciding?: unknown } | null)?.deciding === true)?.server ?? null;
    const ids = [...new Set(servers.flatMap((entry) => entry.organizations.map((organization) => organization.organization_id)))];
    const organizationNames = ids.length > 0 ? await deps.organizationNames(ids).catch(() => ({})) : {};
    return { cluster: deps.cluster, via: deps.serverId, servers, failed, missing: result.missing.map((entry) => entry.server), deciding, organizationNames };
  });
}

/** A worker's `overview.worker`: its own connections and request count, which only it knows. */
export function registerWorkerFigures(handle: Handle, figures: () => WorkerFigures): void {
  handle('overview.worker', () => figures());
}
