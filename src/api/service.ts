import { Type, type Static } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import type { Pool } from 'undici';
import type { Store } from '../db/types.js';
import { SecretKeyError, SecretUnreadableError } from '../secrets/errors.js';
import { revealSecrets } from '../secrets/fields.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { DefinitionCache } from './definition-cache.js';
import { dispatch, type ApiReply } from './dispatch.js';
import { API_ERRORS } from './errors.js';
import { HTTP_METHODS, compileProvider, type Provider } from './provider.js';
import { upstreamRequest } from './request.js';
import { schemaViolation } from './schema-violation.js';

export type { ApiReply } from './dispatch.js';

/** `server.api.send()`: the `/api` envelope of SPEC 10.2 with the organization it runs for. */
export const ApiSendEnvelope = Type.Object(
  {
    organization_id: Type.String({ minLength: 1, maxLength: 256 }),
    api: Type.String({ minLength: 1, maxLength: 64 }),
    endpoint: Type.String({ minLength: 1, maxLength: 64 }),
    method: Type.Union(HTTP_METHODS.map((method) => Type.Literal(method))),
    data: Type.Optional(Type.Unknown()),
  },
  // Authorized envelopes also carry host, user and socket; they are ignored here.
  { additionalProperties: true },
);
export type ApiSendEnvelope = Static<typeof ApiSendEnvelope>;
const sendCheck = lazyCheck(ApiSendEnvelope);

export interface ApiCallOptions {
  /** Aborts the call (a workflow's deadline); never lengthens the provider's own timeout. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ApiLog {
  warn(details: Record<string, unknown>, message: string): void;
}

/**
 * undici (a megabyte of code and its parser's WebAssembly) is loaded on the first provider call: a process that
 * never calls one (the primary, most workers of a control-only node) never holds it.
 */
let PoolClass: typeof Pool | undefined;
async function loadPool(): Promise<typeof Pool> {
  PoolClass ??= (await import('undici')).Pool;
  return PoolClass;
}

/** Pools stay warm this long without requests; a provider nobody calls holds no sockets. */
const KEEP_ALIVE_MS = 4_000;
const CONNECTIONS_PER_PROVIDER = 32;

/**
 * SPEC 10: API providers of every organization, one undici pool per provider. Requests can only reach the
 * provider's configured origin and base path; headers come from the provider definition, never from callers.
 */
export class ApiService {
  private readonly providers: DefinitionCache<Provider> | undefined;
  private readonly pools = new Map<string, { origin: string; pool: Pool }>();

  constructor(
    store: Store | undefined,
    private readonly log?: ApiLog,
    private readonly secrets?: SecretOpener,
  ) {
    this.providers = store && new DefinitionCache(store, 'apis', (document) => compileProvider(this.withOpenSecrets(document)));
  }

  /** The same path as `POST /api`, without HTTP: the caller names the organization and is trusted. */
  async send(envelope: unknown, options: ApiCallOptions = {}): Promise<ApiReply> {
    if (typeof envelope === 'object' && envelope !== null && Object.hasOwn(envelope, 'url')) {
      throw API_ERRORS.invalidEnvelope('url: there is no raw URL shortcut; name an api and an endpoint');
    }
    const violation = schemaViolation(sendCheck, envelope);
    if (violation) throw API_ERRORS.invalidEnvelope(violation);
    const valid = envelope as ApiSendEnvelope;
    // A provider compiled a moment ago needs no promise; anything else (a store read, a refusal) takes the long way.
    const provider = this.providers?.peek(valid.organization_id, valid.api) ?? (await this.provider(valid.organization_id, valid.api));
    const endpoint = provider.endpoints.get(valid.endpoint);
    if (!endpoint) throw API_ERRORS.unknownEndpoint(valid.api, valid.endpoint);
    if (endpoint.method !== valid.method) {
      throw API_ERRORS.methodMismatch(valid.api, valid.endpoint, endpoint.method, valid.method);
    }
    const request = upstreamRequest(provider, valid.endpoint, valid.data);
    const timeoutMs = Math.min(provider.timeoutMs, options.timeoutMs ?? Number.POSITIVE_INFINITY);
    const headers = request.body === undefined ? provider.headers : provider.jsonHeaders;
    const poolClass = PoolClass ?? (await loadPool());
    return dispatch(this.pool(poolClass, valid.organization_id, valid.api, provider.origin), valid.api, request, headers, {
      timeoutMs,
      maxResponseBytes: provider.maxResponseBytes,
      signal: options.signal,
    });
  }

  /** SPEC 5.5: an inactive organization keeps no sockets open and no compiled providers. */
  organizationInactive(organizationId: string): void {
    this.providers?.forget(organizationId);
    for (const [key, { pool }] of this.pools) {
      if (key.startsWith(`${organizationId}\u0000`)) {
        this.pools.delete(key);
        void pool.close().catch(() => undefined);
      }
    }
  }

  async close(): Promise<void> {
    this.providers?.close();
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map(({ pool }) => pool.close().catch(() => undefined)));
  }

  private async provider(organizationId: string, name: string): Promise<Provider> {
    if (!this.providers) throw API_ERRORS.unavailable();
    const provider = await this.providers.get(organizationId, name);
    if (!provider) throw API_ERRORS.unknownApi(name);
    return provider;
  }

  /**
   * The stored provider with its header secrets opened, once per compile (the cache keeps the result, or this
   * error, until the provider changes): a secret that does not open is logged here and refused on every call.
   */
  private withOpenSecrets(document: Record<string, unknown>): Record<string, unknown> {
    try {
      return revealSecrets('apis', document, this.secrets);
    } catch (error) {
      if (!(error instanceof SecretUnreadableError) && !(error instanceof SecretKeyError)) throw error;
      this.log?.warn({ api: document.name, organization: document.organization_id, reason: error.message }, 'a provider secret cannot be opened');
      throw API_ERRORS.secretUnreadable(String(document.name));
    }
  }

  private pool(poolClass: typeof Pool, organizationId: string, name: string, origin: string): Pool {
    const key = `${organizationId}\u0000${name}`;
    const current = this.pools.get(key);
    if (current?.origin === origin) return current.pool;
    if (current) {
      // The provider moved: requests in flight finish on the old pool, new ones go to the new origin.
      void current.pool.close().catch((error: unknown) => this.log?.warn({ err: error, api: name }, 'closing a provider pool failed'));
    }
    const pool = new poolClass(origin, { connections: CONNECTIONS_PER_PROVIDER, keepAliveTimeout: KEEP_ALIVE_MS });
    this.pools.set(key, { origin, pool });
    return pool;
  }
}
