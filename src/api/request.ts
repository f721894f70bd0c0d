import { API_ERRORS } from './errors.js';
import { QUERY_METHODS, type HttpMethod, type Provider } from './provider.js';

export interface UpstreamRequest {
  method: HttpMethod;
  /** Path and query, under the provider's base path. */
  path: string;
  body?: string;
}

const MAX_PARAMETER_LENGTH = 1024;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

const refuse = (name: string, why: string) => API_ERRORS.invalidPathParameter(name, why);

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * A path parameter may only ever fill its own segment: encoding alone is not enough, because upstreams that
 * decode `%2F` or normalize `..` would let a value climb out of the endpoint, so such values are refused.
 */
function parameterValue(name: string, value: unknown): string {
  if (value === undefined) throw refuse(name, 'path parameter is required');
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') throw refuse(name, 'path parameter must be a string or a number');
  if (value.length === 0 || value.length > MAX_PARAMETER_LENGTH) throw refuse(name, `path parameter must be 1 to ${MAX_PARAMETER_LENGTH} characters`);
  assertSegment(name, value);
  // Upstreams that decode twice would see the decoded form: it must be as harmless as the value itself.
  let decoded = value;
  if (value.includes('%')) {
    try {
      decoded = decodeURIComponent(value);
    } catch {
      // not percent-encoded text: nothing more to check
    }
  }
  if (decoded !== value) assertSegment(name, decoded);
  return encodeURIComponent(value);
}

function assertSegment(name: string, value: string): void {
  if (CONTROL.test(value)) throw refuse(name, 'path parameter must not contain control characters (CR, LF, ...)');
  if (value.includes('/') || value.includes('\\')) throw refuse(name, 'path parameter must not contain "/" or "\\"');
  if (value.includes('..')) throw refuse(name, 'path parameter must not contain ".."');
  if (value === '.') throw refuse(name, 'path parameter must not be "."');
  if (SCHEME.test(value)) throw refuse(name, 'path parameter must not be a URL');
}

function queryString(rest: Record<string, unknown>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(rest)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item === null || typeof item === 'string' || typeof item === 'boolean' || (typeof item === 'number' && Number.isFinite(item))) query.append(name, String(item));
      else throw API_ERRORS.invalidEnvelope(`data.${name}: query values must be strings, numbers, booleans or lists of them`);
    }
  }
  const text = query.toString();
  return text ? `?${text}` : '';
}

/**
 * SPEC 10.2: path parameters come from `data`, the rest is the JSON body (or the query for GET and HEAD). Each
 * parameter is checked and then percent-encoded into the one segment its placeholder holds: with no "/", "?" or
 * "#" left and no "." or ".." segment possible, the path cannot leave the provider's base path.
 */
export function upstreamRequest(provider: Provider, endpointName: string, data: unknown): UpstreamRequest {
  const endpoint = provider.endpoints.get(endpointName)!;
  if (data !== undefined && data !== null && !isRecord(data)) throw API_ERRORS.invalidEnvelope('data: must be an object');
  const fields = (data ?? {}) as Record<string, unknown>;
  let path = endpoint.parts[0]!;
  for (let index = 0; index < endpoint.parameters.length; index += 1) {
    const name = endpoint.parameters[index]!;
    path += parameterValue(name, Object.hasOwn(fields, name) ? fields[name] : undefined) + endpoint.parts[index + 1]!;
  }
  const rest: Record<string, unknown> = {};
  let hasRest = false;
  for (const key of Object.keys(fields)) {
    if (endpoint.parameters.includes(key)) continue;
    // A "__proto__" field stays a field of the body instead of replacing the prototype.
    if (key === '__proto__') Object.defineProperty(rest, key, { value: fields[key], enumerable: true, writable: true, configurable: true });
    else rest[key] = fields[key];
    hasRest = true;
  }
  if (QUERY_METHODS.has(endpoint.method)) return { method: endpoint.method, path: path + queryString(rest) };
  return hasRest ? { method: endpoint.method, path, body: JSON.stringify(rest) } : { method: endpoint.method, path };
}
