import { createRequire } from 'node:module';
import type { Dispatcher } from 'undici';
import type { AuthorizedEnvelope } from '../auth/envelope.js';
import type { ResolvedConfig } from '../config/schema.js';
import { CLUSTERS, SERVERS } from '../inventory/records.js';
import { RateLimitedWarnings } from '../logging/rate-limited.js';
import { managerUrl, type ManagerConnection } from './connection.js';
import { MANAGER_ERRORS, ManagerError, managesNoFleet } from './errors.js';
import type { ManagerLog } from './log.js';
import type { CreateServerInput, CreateServerResult, TerminateServerInput, TerminateServerResult } from './fleet.js';

export type { ManagerLog } from './log.js';

/** An initial upload recorded as completed: the cluster, the entry's URL and position, and when. */
export interface UploadCompletion {
  cluster_id: string;
  url: string;
  index: number;
  completedAt: string;
}

/** The parent-side commands (`ManagedFleet`); a server that manages no fleet has none. */
export interface FleetCommands {
  createServer(input: CreateServerInput): Promise<CreateServerResult>;
  terminateServer(input: TerminateServerInput): Promise<TerminateServerResult>;
}

/** The parent's `/manager` envelopes (`ManagerCommands`). */
export interface ManagerEnvelopeHandler {
  handle(envelope: AuthorizedEnvelope): Promise<Record<string, unknown>>;
}

export interface ManagerOptions {
  config: ResolvedConfig['manager'];
  connection: ManagerConnection;
  log: ManagerLog;
  fleet?: FleetCommands;
  commands?: ManagerEnvelopeHandler;
  /** The HTTP client of `send` (default: an agent of its own). */
  dispatcher?: Dispatcher;
}

/** Fields of an authorized envelope that belong to the caller here, not to the parent (SPEC 13.1). */
const CALLER_SCOPE = new Set(['organization_id', 'host', 'user', 'socket', 'apikey']);
const MAX_REPLY_BYTES = 1024 * 1024;
/** Mirrors waiting on a slow parent at once; past it a save is not mirrored, so a slow parent costs no memory. */
const MAX_MIRRORS_IN_FLIGHT = 64;
/** Mirror failures come from the parent's state, not from this server: a parent down must not flood the log. */
const FAILURE_LINES = { max: 10, windowMs: 10_000 };

/** The HTTP client, loaded on first use: most servers never reach a manager and need not hold its code. */
const undici = () => createRequire(import.meta.url)('undici') as typeof import('undici');

const hidden = (value: unknown): PropertyDescriptor => ({ value, enumerable: false, writable: false, configurable: false });

/**
 * `server.manager` (SPEC 13.1). Only `organization_id` and `host` are enumerable: `JSON.stringify`, inventory
 * writes and log lines that take the object carry no key and no function.
 */
export class Manager {
  readonly organization_id: string | null;
  readonly host: string | null;
  declare readonly apiKey: string | undefined;
  declare readonly config: ResolvedConfig['manager'];
  declare readonly http: Dispatcher;
  /** An envelope to the parent's `/manager`; `signal` gives up on the answer early (the timeout always applies). */
  declare readonly send: (envelope: Record<string, unknown>, options?: { signal?: AbortSignal }) => Promise<unknown>;
  declare readonly createServer: FleetCommands['createServer'];
  declare readonly terminateServer: FleetCommands['terminateServer'];
  declare private readonly log: ManagerLog;
  declare private readonly commands: ManagerEnvelopeHandler | undefined;
  declare private readonly failures: RateLimitedWarnings;
  declare private mirroring: number;
  declare private dispatcher: Dispatcher | undefined;

  constructor(options: ManagerOptions) {
    this.organization_id = options.connection.organization_id;
    this.host = options.connection.host;
    const unavailable = () => Promise.reject(managesNoFleet());
    Object.defineProperties(this, {
      apiKey: hidden(options.connection.apiKey ?? options.config.apiKey),
      config: hidden(options.config),
      dispatcher: { value: options.dispatcher, enumerable: false, writable: true },
      http: { get: () => (this.dispatcher ??= new (undici().Agent)({ keepAliveTimeout: 4_000, connections: 8 })), enumerable: false, configurable: false },
      log: hidden(options.log),
      commands: hidden(options.commands),
      failures: hidden(new RateLimitedWarnings({ ...FAILURE_LINES, what: 'manager mirror failures', log: options.log })),
      mirroring: { value: 0, enumerable: false, writable: true },
      send: hidden((envelope: Record<string, unknown>, options?: { signal?: AbortSignal }) => this.sendToParent(envelope, options?.signal)),
      createServer: hidden(options.fleet ? options.fleet.createServer.bind(options.fleet) : unavailable),
      terminateServer: hidden(options.fleet ? options.fleet.terminateServer.bind(options.fleet) : unavailable),
    });
  }

  get managed(): boolean {
    return this.organization_id !== null && this.host !== null && this.apiKey !== undefined;
  }

  /** SPEC 13.3: an authorized `/manager` envelope, on a server that manages a fleet. */
  handle(envelope: AuthorizedEnvelope): Promise<Record<string, unknown>> {
    if (!this.commands) return Promise.reject(managesNoFleet());
    return this.commands.handle(envelope);
  }

  /**
   * SPEC 13.2: after a successful `state.save`, the same section goes to the parent once. The save never waits
   * for it; a failure is one warning, never retried or queued (the next save carries the newer state anyway).
   */
  mirrorSave(serverId: string, _clusterId: string, section: string, fields: Record<string, unknown>): void {
    // Only the section: where the record belongs is the parent's to say (its copy was made with the cluster).
    const set: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) set[`${section}.${name}`] = value;
    const envelope = { method: 'object.update', collection: SERVERS, filter: { _id: serverId }, update: { $set: set } };
    this.mirror(envelope, { server: serverId, section }, 'mirroring an inventory save to the manager');
  }

  /**
   * SPEC 14.3: an initial upload recorded as completed in the cluster document is patched into the parent's
   * copy of that cluster once, as a save is mirrored. The entry is matched by position and URL, so a parent
   * copy whose list differs there is left alone rather than marked at the wrong entry.
   */
  mirrorUploadCompletion(patch: UploadCompletion): void {
    const at = `repositories.${patch.index}`;
    const envelope = {
      method: 'object.update',
      collection: CLUSTERS,
      filter: { _id: patch.cluster_id, [`${at}.url`]: patch.url },
      update: { $set: { [`${at}.initialUpload.completed`]: true, [`${at}.initialUpload.completedAt`]: patch.completedAt } },
    };
    this.mirror(envelope, { cluster: patch.cluster_id, url: patch.url }, 'mirroring an initial upload completion to the manager');
  }

  /** One envelope to the parent, on the next turn and never awaited: a failure is one rate-limited warning. */
  private mirror(envelope: Record<string, unknown>, details: Record<string, unknown>, what: string): void {
    if (!this.managed) return;
    if (this.mirroring >= MAX_MIRRORS_IN_FLIGHT) {
      this.failures.warn(this.log, { ...details, code: 'parent_busy', inFlight: this.mirroring }, `${what} skipped: the manager has not answered the earlier ones`);
      return;
    }
    this.mirroring++;
    // Sent on the next turn: the caller's write resolves first, and its caller never pays for the request either.
    new Promise((resolve) => setImmediate(resolve))
      .then(() => this.sendToParent(envelope))
      .catch((error: unknown) => {
        const code = error instanceof ManagerError ? error.code : 'parent_failed';
        this.failures.warn(this.log, { ...details, code, reason: error instanceof Error ? error.message : String(error) }, `${what} failed`);
      })
      .finally(() => this.mirroring--);
  }

  async close(): Promise<void> {
    await this.dispatcher?.close().catch(() => undefined);
  }

  private async sendToParent(envelope: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    if (!this.managed) throw MANAGER_ERRORS.unmanaged();
    const body: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(envelope)) if (!CALLER_SCOPE.has(name)) body[name] = value;
    const url = managerUrl(this.host!);
    let reply: Dispatcher.ResponseData;
    try {
      reply = await undici().request(url, {
        method: 'POST',
        dispatcher: this.http,
        headers: { authorization: `Bearer ${this.apiKey!}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.config.timeoutMs)]) : AbortSignal.timeout(this.config.timeoutMs),
      });
    } catch (error) {
      if (signal?.aborted) throw MANAGER_ERRORS.parentAbandoned().withCause(error);
      const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
      throw timedOut
        ? MANAGER_ERRORS.parentTimeout(this.config.timeoutMs)
        : MANAGER_ERRORS.parentUnreachable().withCause(error);
    }
    const text = await readCapped(reply.body);
    if (reply.statusCode >= 400) {
      throw MANAGER_ERRORS.parentFailed(`${reply.statusCode}${errorCode(text)}`);
    }
    try {
      return text === '' ? null : JSON.parse(text);
    } catch {
      throw MANAGER_ERRORS.parentFailed('with a body that is not JSON');
    }
  }
}

async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > MAX_REPLY_BYTES) {
      body.destroy();
      throw MANAGER_ERRORS.parentFailed('with a body larger than 1 MiB');
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The parent's error code, when it answered in the one error shape: enough to tell a 403 from a 400. */
function errorCode(text: string): string {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' ? ` (${code.slice(0, 64)})` : '';
  } catch {
    return '';
  }
}
