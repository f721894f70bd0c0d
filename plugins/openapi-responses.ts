import {
  DUPLICATE_HEADER_REPLY,
  FALLBACK_REDIRECT_REPLY,
  FALLBACK_UNAVAILABLE_REPLY,
  STORE_UNAVAILABLE_REPLY,
  HEADERS,
  EXAMPLE_NAMES,
  METHOD_NOT_ALLOWED_REPLY,
  TOO_MANY_FAILURES_REPLY,
  UNSUPPORTED_MEDIA_TYPE_REPLY,
  UNSUPPORTED_ENCODING_REPLY,
  UNSUPPORTED_TRANSFER_ENCODING_REPLY,
} from '../schemas/responses.js';

type Schema = Record<string, unknown> & { description?: string; examples?: unknown[]; headers?: Record<string, unknown> };
export type Responses = Record<string, Schema>;

export interface RouteFacts {
  method: string;
  /** The documented path (`/docs`, not the UI plugin's `/docs/`). */
  url: string;
  /** Declared with `config: { envelope: true }`: POST only, JSON only, every reply `Cache-Control: no-store`. */
  envelope: boolean;
  /** Its security takes a key: an address past the failed-authentication limit gets 429 here. */
  takesKey: boolean;
}

/** What the node answers itself even when it serves nothing else: these are never redirected or refused. */
const ALWAYS_SERVED = new Set(['GET /healthz', 'GET /readyz', 'GET /metrics', 'POST /control']);
/** Routes outside the envelope contract whose answers are `Cache-Control: no-store` all the same. */
const NOT_CACHED = new Set(['/healthz', '/readyz', '/metrics', '/ws']);

/** For a status a route declares without saying what it means there. */
const STATUS_MEANINGS: Record<string, string> = {
  '200': 'Success',
  '202': 'Accepted: the work runs after this reply',
  '400': 'The request is invalid',
  '403': 'The request is not authorized',
  '404': 'Not found',
  '413': 'The request body is larger than 1 MiB',
  '503': 'Not available on this server right now',
};

/** Two answers under one status: both meanings, and the examples of both. */
function merged(existing: Schema, addition: Schema): Schema {
  const sentences = [existing.description, addition.description].filter((text): text is string => Boolean(text)).map((text) => text.replace(/\.$/, ''));
  const description = sentences.map((text, index) => (index === 0 ? text : text.charAt(0).toLowerCase() + text.slice(1))).join('. Or: ');
  const seen = new Set((existing.examples ?? []).map((example) => JSON.stringify(example)));
  const extra = (addition.examples ?? []).filter((example) => !seen.has(JSON.stringify(example)));
  return { ...existing, description, examples: [...(existing.examples ?? []), ...extra] };
}

/**
 * Error examples become named ones (by their code), so the docs show `permission_denied` rather than
 * `example2`; `x-examples` is how the generator takes named examples.
 */
function namedExamples(schema: Schema): Schema {
  const examples = schema.examples ?? [];
  const codes = examples.map((example) => (example as { error?: { code?: unknown } }).error?.code);
  if (examples.length === 0 || !codes.every((code) => typeof code === 'string')) return schema;
  const named: Record<string, { summary: string; value: unknown }> = {};
  for (const [index, example] of examples.entries()) {
    const message = (example as { error: { message: string } }).error.message;
    const base = EXAMPLE_NAMES.get(message) ?? (codes[index] as string);
    let name = base;
    for (let n = 2; Object.hasOwn(named, name); n++) name = `${base}_${n}`;
    named[name] = { summary: message, value: example };
  }
  const { examples: _listed, ...rest } = schema;
  return { ...rest, 'x-examples': named };
}

const byStatus = (a: string, b: string) => Number(a) - Number(b);

/**
 * The responses a route documents: what it declares, plus what the app's hooks answer on it — 400 for a
 * duplicated `Host` or `Authorization` header and 501 for a `Transfer-Encoding` other than `chunked` (every route), 429 past the failed-authentication limit (routes
 * that take a key), 405 and 415 (envelope routes), 415 for an encoded body (POST routes), and the fallback's 307 and 503 (every route but the probes,
 * metrics and `POST /control`) — each with a description, the headers it carries and named error examples.
 */
export function documentedResponses(declared: Responses, route: RouteFacts): Responses {
  const responses: Responses = {};
  for (const [status, schema] of Object.entries(declared)) {
    const { $id: _id, ...own } = schema;
    responses[status] = { ...own, description: own.description ?? STATUS_MEANINGS[status] ?? `HTTP ${status}` };
  }
  const add = (status: number, addition: Schema) => {
    const existing = responses[status];
    responses[status] = existing ? merged(existing, addition) : { ...addition };
  };
  add(400, DUPLICATE_HEADER_REPLY as unknown as Schema);
  add(501, UNSUPPORTED_TRANSFER_ENCODING_REPLY as unknown as Schema);
  if (route.takesKey) {
    add(429, TOO_MANY_FAILURES_REPLY as unknown as Schema);
    add(503, STORE_UNAVAILABLE_REPLY as unknown as Schema);
  }
  if (route.envelope) {
    add(405, METHOD_NOT_ALLOWED_REPLY as unknown as Schema);
    add(415, UNSUPPORTED_MEDIA_TYPE_REPLY as unknown as Schema);
  }
  if (route.method === 'POST') add(415, UNSUPPORTED_ENCODING_REPLY as unknown as Schema);
  const redirected = !ALWAYS_SERVED.has(`${route.method} ${route.url}`);
  if (redirected) {
    add(307, FALLBACK_REDIRECT_REPLY);
    add(503, FALLBACK_UNAVAILABLE_REPLY as unknown as Schema);
  }
  const notCached = route.envelope || NOT_CACHED.has(route.url);
  const documented: Responses = {};
  for (const status of Object.keys(responses).sort(byStatus)) {
    const headers = { ...responses[status]!.headers };
    if ((notCached && status !== '101') || (redirected && status === '503')) Object.assign(headers, HEADERS.cacheControl);
    if (status === '405' && route.envelope) Object.assign(headers, HEADERS.allow);
    if (status === '429') Object.assign(headers, HEADERS.retryAfter);
    if (status === '503' && redirected) Object.assign(headers, HEADERS.fallbackRetryAfter);
    if (status === '501') Object.assign(headers, HEADERS.connection);
    const schema = namedExamples(responses[status]!);
    documented[status] = Object.keys(headers).length > 0 ? { ...schema, headers } : schema;
  }
  return documented;
}
