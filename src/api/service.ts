import { Type, type Static } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import type { Pool, buildConnector } from 'undici';
import type { Store } from '../db/types.js';
import { SecretKeyError, SecretUnreadableError } from '../secrets/errors.js';
import { revealSecrets } from '../secrets/fields.js';
import type { SecretOpener } from '../secrets/keyring.js';
import { DefinitionCache } from './definition-cache.js';
import { EgressPolicy } from './egress.js';
import { EgressRefusedError, guardedConnector, type ResolveAll } from './egress-connector.js';
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

/** SPEC 10.4: where providers may connect. */
export interface ApiEgress {
  policy: EgressPolicy;
  /** Organizations whose providers connect anywhere (the platform's, under `egress.platform: "unrestricted"`). */
  exempt(organizationId: string): boolean | Promise<boolean>;
  /** How host names are resolved before the check (the system resolver by default). */
  resolveAll?: ResolveAll;
}

/**
 * undici (a megabyte of code and its parser's WebAssembly) is loaded on the first provider call: a process that
 * never calls one (the primary, most workers of a control-only node) never holds it.
 */
let undici: { Pool: typeof Pool; buildConnector: typeof buildConnector } | undefined;
async function loadUndici(): Promise<NonNullable<typeof undici>> {
  const { Pool, buildConnector } = await import('undici');
  undici ??= { Pool, buildConnector };
  return undici;
}

/** A refused provider is logged at most this often: a tenant retrying it must not flood the log. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;

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
  private readonly egress: ApiEgress;

  /** Without `egress`, every organization's providers follow the default policy: public addresses only. */
  constructor(
    store: Store | undefined,
    private readonly log?: ApiLog,
    private readonly secrets?: SecretOpener,
    egress?: ApiEgress,
  ) {
    this.egress = egress ?? { policy: new EgressPolicy(), exempt: () => false };
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
    const key = `${valid.organization_id}\u0000${valid.api}`;
    const current = this.pools.get(key);
    const pool = current?.origin === provider.origin ? current.pool : await this.openPool(key, valid.organization_id, valid.api, provider.origin);
    return dispatch(pool, valid.api, request, headers, {
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

  private async openPool(key: string, organizationId: string, name: string, origin: string): Promise<Pool> {
    const { Pool: PoolClass, buildConnector: connector } = undici ?? (await loadUndici());
    const exempt = await this.egress.exempt(organizationId);
    // Another call may have opened it while this one waited.
    const opened = this.pools.get(key);
    if (opened?.origin === origin) return opened.pool;
    if (opened) {
      // The provider moved: requests in flight finish on the old pool, new ones go to the new origin.
      void opened.pool.close().catch((error: unknown) => this.log?.warn({ err: error, api: name }, 'closing a provider pool failed'));
    }
    const connect = exempt ? undefined : this.refusalLogged(guardedConnector(this.egress.policy, connector({}), this.egress.resolveAll), organizationId, name);
    const pool = new PoolClass(origin, { connections: CONNECTIONS_PER_PROVIDER, keepAliveTimeout: KEEP_ALIVE_MS, ...(connect ? { connect } : {}) });
    this.pools.set(key, { origin, pool });
    return pool;
  }

  /** The provider's refusals reach the log once a minute at most, whatever the number of calls. */
  private refusalLogged(connect: buildConnector.connector, organizationId: string, name: string): buildConnector.connector {
    let loggedAt = Number.NEGATIVE_INFINITY;
    return (options, callback) =>
      connect(options, (...result) => {
        const error = result[0];
        if (error instanceof EgressRefusedError && Date.now() - loggedAt >= REFUSAL_LOG_INTERVAL_MS) {
          loggedAt = Date.now();
          this.log?.warn(
            { api: name, organization: organizationId, host: error.hostname, address: error.address, rule: error.rule },
            'the egress policy refused a provider connection (logged once a minute per provider)',
          );
        }
        callback(...result);
      });
  }
}
