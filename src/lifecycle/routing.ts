import type { NodeIdentity } from './identity.js';
import type { LifecycleLog, NodeScope } from './ports.js';

/** The removal request a routing workflow prepares: an `/api` envelope without its organization (SPEC 10.2). */
export interface RemoveRequest {
  api: string;
  endpoint: string;
  method: string;
  data?: Record<string, unknown>;
}

export interface RoutingSettings {
  enabled: boolean;
  workflow: string;
}

export interface RoutingDeps extends NodeScope {
  settings: RoutingSettings;
  /** The workflow envelope's scope is the node's organization and host, as the design's example writes it. */
  workflows: { run(name: string, input: unknown, context: { organization_id: string; host: string }): Promise<unknown> };
  api: { send(envelope: Record<string, unknown>): Promise<unknown> };
  log: Pick<LifecycleLog, 'info' | 'warn'>;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Scope order: records naming neither, then the cluster, then this server; the narrower one wins. */
const rank = (record: Record<string, unknown>) => (record.server_id !== undefined ? 2 : record.cluster_id !== undefined ? 1 : 0);

/**
 * The settings after the platform's `servers_config` records of type `routing` that apply to this node: a
 * record without `server_id` / `cluster_id` applies everywhere, one with them only where they match.
 */
export async function routingSettings(deps: Pick<RoutingDeps, 'store' | 'organizationId' | 'serverId' | 'clusterId' | 'settings'>): Promise<RoutingSettings> {
  const records = await deps.store.collection('servers_config').find({ organization_id: deps.organizationId, type: 'routing' }, { sort: { _id: 1 } });
  const settings = { ...deps.settings };
  const applying = records
    .filter((record) => (record.server_id === undefined || record.server_id === deps.serverId) && (record.cluster_id === undefined || record.cluster_id === deps.clusterId))
    .sort((a, b) => rank(a) - rank(b));
  for (const record of applying) {
    const config = isRecord(record.config) ? record.config : {};
    if (typeof config.enabled === 'boolean') settings.enabled = config.enabled;
    if (typeof config.workflow === 'string' && config.workflow.length > 0) settings.workflow = config.workflow;
  }
  return settings;
}

/** `remove` of the workflow's result, as the seed shapes it (`<workflow>[0].remove`) or flat. */
export function removeRequestOf(result: unknown, workflow: string): RemoveRequest | undefined {
  const candidates = [result, Array.isArray(result) ? result[0] : undefined, isRecord(result) && Array.isArray(result[workflow]) ? result[workflow][0] : undefined];
  for (const candidate of candidates) {
    const remove = isRecord(candidate) ? candidate.remove : undefined;
    if (isRecord(remove) && typeof remove.api === 'string' && typeof remove.endpoint === 'string' && typeof remove.method === 'string' && (remove.data === undefined || isRecord(remove.data))) {
      return { api: remove.api, endpoint: remove.endpoint, method: remove.method, data: remove.data as Record<string, unknown> | undefined };
    }
  }
  return undefined;
}

/**
 * SPEC 14.1: registers this node with the edge once after readiness and withdraws it at graceful stop. The
 * removal request lives only in memory: a node that dies abruptly leaves its registration to the edge's own
 * health checks. Nothing here throws into the lifecycle: failures are logged.
 */
export class RoutingHooks {
  #registration: Promise<void> | undefined;
  #remove: RemoveRequest | undefined;
  #host: string | undefined;

  constructor(private readonly deps: RoutingDeps) {}

  /** Runs the routing workflow; every later call (a repeated readiness) shares the first registration. */
  register(identity: NodeIdentity): Promise<void> {
    this.#registration ??= this.#register(identity);
    return this.#registration;
  }

  async #register(identity: NodeIdentity): Promise<void> {
    const { deps } = this;
    try {
      const settings = await routingSettings(deps);
      if (!settings.enabled) {
        deps.log.info({ workflow: settings.workflow }, 'routing hooks disabled');
        return;
      }
      const input = { server_id: deps.serverId, cluster_id: deps.clusterId, ip: identity.ip, host: identity.host, infrastructure: identity.infrastructure, location: identity.location };
      this.#host = identity.host;
      const result = await deps.workflows.run(settings.workflow, input, { organization_id: deps.organizationId, host: identity.host });
      this.#remove = removeRequestOf(result, settings.workflow);
      if (this.#remove) deps.log.info({ workflow: settings.workflow, api: this.#remove.api, endpoint: this.#remove.endpoint }, 'node registered for routing');
      else deps.log.warn({ workflow: settings.workflow }, 'the routing workflow returned no remove request (api, endpoint, method); nothing will be withdrawn at shutdown');
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      // No workflow of that name is routing left unconfigured, not a failure: most servers have no edge to tell.
      if (code === 'unknown_workflow') deps.log.info({ reason: (error as Error).message }, 'no routing workflow is defined; the node is not registered for routing');
      else deps.log.warn({ code, reason: (error as Error).message }, 'the routing workflow failed; the node is not registered for routing');
    }
  }

  /**
   * Sends the removal request once, with the stop's `reason`, after any registration in flight. Without a
   * prepared request nothing is looked up or sent. Resolves whatever happens; `signal` cuts the wait.
   */
  async withdraw(reason: string, signal?: AbortSignal): Promise<void> {
    const { deps } = this;
    if (this.#registration) {
      try {
        await abortable(this.#registration, signal);
      } catch {
        deps.log.warn({ reason }, 'the routing registration did not finish within the shutdown budget; nothing withdrawn');
        return;
      }
    }
    const remove = this.#remove;
    this.#remove = undefined;
    if (!remove) return;
    try {
      const scope = { organization_id: deps.organizationId, ...(this.#host ? { host: this.#host } : {}) };
      await abortable(deps.api.send({ ...scope, ...remove, data: { ...remove.data, reason } }), signal);
      deps.log.info({ api: remove.api, endpoint: remove.endpoint, reason }, 'node withdrawn from routing');
    } catch (error) {
      deps.log.warn({ api: remove.api, endpoint: remove.endpoint, reason: (error as Error).message }, 'the routing removal failed');
    }
  }
}

/** The promise, or a rejection when `signal` fires first. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new Error('aborted: the shutdown budget is spent'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('aborted: the shutdown budget is spent'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
