import path from 'node:path';
import type { ResolvedConfig } from '../config/schema.js';
import type { Store } from '../db/types.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { RepositoryService } from '../repositories/service.js';
import { InitialUpload, type InitialUploadDeps } from '../repositories/upload.js';
import { resolveNodeIdentity, type NodeIdentity } from './identity.js';
import { credentialEnvironment, loadNodeCredential } from './node-credential.js';
import type { LifecycleLog } from './ports.js';
import { RoutingHooks, type RoutingDeps } from './routing.js';

export interface NodeLifecycleDeps {
  config: Pick<ResolvedConfig, 'node' | 'server' | 'routing' | 'repositories' | 'dataDir'>;
  store: Pick<Store, 'collection'>;
  /** The platform organization; without one there is nothing to register, load or clone. */
  organizationId: string | undefined;
  serverId: string;
  clusterId: string;
  workflows: RoutingDeps['workflows'];
  api: RoutingDeps['api'];
  log: LifecycleLog;
  secrets?: SecretOpener;
  /** Writes the identity into this server's inventory record (the primary's section). */
  saveIdentity?: (identity: NodeIdentity) => Promise<void>;
  mirror?: InitialUploadDeps['mirror'];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** The upload's process group is killed at once; the wait only covers giving its reservation back. */
const UPLOAD_ABORT_WAIT_MS = 2_000;

/**
 * SPEC 14 in the primary, in boot order: `start()` after the store is up and before workers fork (identity,
 * credential, checkouts; returns what workers inherit), `ready()` after startup readiness (routing, initial
 * upload), `withdraw()` first in every graceful stop, `checkpoint()` once workers are down. None throws.
 */
export class NodeLifecycle {
  identity: NodeIdentity | undefined;
  readonly repository: RepositoryService | undefined;
  readonly #routing: RoutingHooks | undefined;
  #upload: InitialUpload | undefined;

  constructor(private readonly deps: NodeLifecycleDeps) {
    const { config, organizationId } = deps;
    if (!organizationId) return;
    const common = { store: deps.store, organizationId, serverId: deps.serverId, clusterId: deps.clusterId };
    this.#routing = new RoutingHooks({ ...common, settings: config.routing, workflows: deps.workflows, api: deps.api, log: deps.log });
    const projectRoot = path.resolve(deps.cwd ?? process.cwd(), config.repositories.projectRoot ?? '.');
    this.repository = new RepositoryService({
      ...common, projectRoot, stateDir: config.repositories.stateDir ?? path.join(config.dataDir, 'repositories'), log: deps.log, secrets: deps.secrets, baseEnv: deps.env,
    });
  }

  /** Identity, node credential and checkouts; the environment workers (and the upload command) inherit. */
  async start(): Promise<Record<string, string>> {
    const { deps } = this;
    this.identity = await resolveNodeIdentity(deps.config, { warn: deps.log.warn.bind(deps.log) });
    await deps.saveIdentity?.(this.identity).catch((error: unknown) => deps.log.warn({ reason: (error as Error).message }, 'the node identity could not be saved to the inventory'));
    if (!deps.organizationId || !this.repository) return {};
    const credential = await loadNodeCredential({ store: deps.store, organizationId: deps.organizationId, secrets: deps.secrets, log: deps.log });
    try {
      await this.repository.prepare();
    } catch (error) {
      deps.log.error({ reason: (error as Error).message }, 'cluster repositories could not be read; none prepared');
    }
    const inherited = { ...credentialEnvironment(credential), ...this.repository.workerEnvironment() };
    this.#upload = new InitialUpload({
      store: deps.store,
      organizationId: deps.organizationId,
      serverId: deps.serverId,
      clusterId: deps.clusterId,
      command: deps.config.repositories.uploadCommand,
      timeoutMs: deps.config.repositories.uploadTimeoutMs,
      env: { ...(deps.env ?? process.env), ...inherited },
      log: deps.log,
      mirror: deps.mirror,
    });
    return inherited;
  }

  /** After startup readiness; repeated readiness shares the first run of each. */
  ready(): Promise<void> {
    const identity = this.identity;
    const registration = identity ? this.#routing?.register(identity) : undefined;
    const upload = this.#upload?.publish(this.repository?.repositories ?? []).then(() => undefined);
    return Promise.all([registration, upload]).then(() => undefined);
  }

  /** First in a graceful stop: the routing removal with the stop's reason, bounded by `signal`. */
  withdraw(reason: string, signal?: AbortSignal): Promise<void> {
    return this.#routing?.withdraw(reason, signal) ?? Promise.resolve();
  }

  /** Once workers are down: cut an upload in flight, then commit-and-push the checkouts within `budgetMs`. */
  async checkpoint(reason: string, budgetMs: number): Promise<void> {
    const started = Date.now();
    await this.#upload?.abort(Math.min(budgetMs, UPLOAD_ABORT_WAIT_MS));
    await this.repository?.checkpoint(Math.max(0, budgetMs - (Date.now() - started)), reason);
  }
}
