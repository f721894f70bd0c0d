import { Type, type Static } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import { API_ERRORS } from './errors.js';
import { schemaViolation } from './schema-violation.js';

export const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];
/** Methods whose `data` (beyond path parameters) becomes the query string instead of a JSON body. */
export const QUERY_METHODS: ReadonlySet<HttpMethod> = new Set(['get', 'head']);

/** Names of providers, endpoints, workflows and webhooks: one URL path segment and one dotted-method segment. */
export const ResourceName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$', description: 'Letters, digits, "_" and "-", at most 64' });
const HeaderName = Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$" });
/** A stored secret: sent upstream, never returned by reads, never printed or logged. */
export const SecretValue = Type.Object({ secret: Type.String({ minLength: 1, maxLength: 8192 }) }, { additionalProperties: false });
const HeaderValue = Type.Union([Type.String({ maxLength: 8192, pattern: '^[^\\r\\n\\0]*$' }), SecretValue], {
  description: 'A plain value (returned by reads) or { "secret": "..." } (never returned or logged)',
});
const PARAMETER = '\\{[A-Za-z0-9_]{1,64}\\}';
const SEGMENT = `(?:[A-Za-z0-9._~!$&'()*+,;=:@%-]|${PARAMETER})+`;

export const Endpoint = Type.Object(
  {
    method: Type.Union(HTTP_METHODS.map((method) => Type.Literal(method)), { description: 'HTTP method, lower case' }),
    path: Type.String({ maxLength: 2048, pattern: `^/(${SEGMENT}(/${SEGMENT})*/?)?$`, description: 'Path under the baseUrl; {name} takes data.name', examples: ['/items/{id}'] }),
    description: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

export const MAX_TIMEOUT_MS = 120_000;
export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** SPEC 10.1: an API provider as written in `apis` (resource files and CRUD alike). */
export const ApiProviderDefinition = Type.Object(
  {
    name: ResourceName,
    baseUrl: Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) origin and optional base path; requests never leave it' }),
    headers: Type.Optional(Type.Record(HeaderName, HeaderValue, { maxProperties: 64, additionalProperties: false })),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_MS, description: `Whole-request timeout (default ${DEFAULT_TIMEOUT_MS})` })),
    maxResponseBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RESPONSE_BYTES, description: 'Response size cap (default 1 MiB)' })),
    endpoints: Type.Record(ResourceName, Endpoint, { minProperties: 1, maxProperties: 512, additionalProperties: false }),
    description: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type ApiProviderDefinition = Static<typeof ApiProviderDefinition>;

const definitionCheck = lazyCheck(ApiProviderDefinition);
/** Framing and connection headers belong to the HTTP client; a provider setting them would corrupt requests. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer', 'proxy-connection']);

/** A provider ready to dispatch: the validated definition with its base URL taken apart once. */
export interface Provider {
  readonly definition: ApiProviderDefinition;
  readonly origin: string;
  /** Base path without its trailing slash ('' for the root). */
  readonly basePath: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  /** Endpoints with their paths split at the parameters, base path included in the first part. */
  readonly endpoints: ReadonlyMap<string, CompiledEndpoint>;
  /** Upstream headers, secrets resolved: without and with a JSON body. */
  readonly headers: Readonly<Record<string, string>>;
  readonly jsonHeaders: Readonly<Record<string, string>>;
}

export interface CompiledEndpoint {
  readonly method: HttpMethod;
  /** Literal path pieces around the parameters: parts.length === parameters.length + 1. */
  readonly parts: readonly string[];
  readonly parameters: readonly string[];
}

function compileEndpoint(basePath: string, endpoint: Static<typeof Endpoint>): CompiledEndpoint {
  // split() with a capturing group alternates literal pieces and parameter names.
  const pieces = endpoint.path.split(/\{([A-Za-z0-9_]{1,64})\}/);
  const parts = pieces.filter((_piece, index) => index % 2 === 0);
  parts[0] = basePath + parts[0];
  return { method: endpoint.method, parts, parameters: pieces.filter((_piece, index) => index % 2 === 1) };
}

/** Why a definition is refused, as `field: problem`; undefined when it is valid. */
export function providerViolation(value: unknown, prefix = ''): string | undefined {
  const violation = schemaViolation(definitionCheck, value, prefix);
  if (violation) return violation;
  const definition = value as ApiProviderDefinition;
  const where = (field: string) => [prefix, field].filter(Boolean).join('.');
  const base = parseBaseUrl(definition.baseUrl);
  if (typeof base === 'string') return `${where('baseUrl')}: ${base}`;
  for (const name of Object.keys(definition.headers ?? {})) {
    if (RESERVED_HEADERS.has(name.toLowerCase())) return `${where(`headers.${name}`)}: set by the server, not by a provider`;
  }
  for (const [name, endpoint] of Object.entries(definition.endpoints)) {
    if (endpoint.path.split('/').some((segment) => segment === '.' || segment === '..')) return `${where(`endpoints.${name}.path`)}: "." and ".." segments are not allowed`;
  }
  return undefined;
}

function parseBaseUrl(text: string): { origin: string; basePath: string } | string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  // Credentials in the URL would be returned by every read; use a { "secret" } header instead.
  if (url.username || url.password) return 'must not carry credentials; put them in a { "secret" } header';
  if (url.search || url.hash || text.includes('?') || text.includes('#')) return 'must not have a query or fragment';
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, '') };
}

/**
 * Headers that hold a repository's git credentials (SPEC 14.3) rather than HTTP headers: kept with the provider
 * (sealed like any secret header) and read by the repositories, never sent upstream.
 */
export const GIT_CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(['git-ssh-key', 'git-known-hosts', 'git-username']);

/** Validates a stored document and prepares it; an invalid one is the tenant's own configuration error (422). */
export function compileProvider(document: Record<string, unknown>): Provider {
  const { _id, organization_id, createdAt, updatedAt, ...definition } = document;
  const violation = providerViolation(definition);
  if (violation) throw API_ERRORS.invalidProvider(String(document.name), violation);
  const valid = definition as ApiProviderDefinition;
  const base = parseBaseUrl(valid.baseUrl) as { origin: string; basePath: string };
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'fleetplane' };
  for (const [name, value] of Object.entries(valid.headers ?? {})) {
    if (!GIT_CREDENTIAL_HEADERS.has(name.toLowerCase())) headers[name.toLowerCase()] = typeof value === 'string' ? value : value.secret;
  }
  const endpoints = new Map(Object.entries(valid.endpoints).map(([name, endpoint]) => [name, compileEndpoint(base.basePath, endpoint)]));
  return {
    definition: valid,
    endpoints,
    origin: base.origin,
    basePath: base.basePath,
    timeoutMs: valid.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxResponseBytes: valid.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    headers,
    jsonHeaders: { ...headers, 'content-type': 'application/json' },
  };
}
