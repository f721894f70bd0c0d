import { API_ERRORS } from '../api/errors.js';
import type { HttpMethod } from '../api/provider.js';
import type { ApiReply } from '../api/service.js';
import type { ApiSend } from './provider-port.js';

/** A provider answered in this process instead of over HTTP: the same envelope, the same `{ status, data }`. */
export interface BuiltinProvider {
  readonly endpoints: Readonly<Record<string, HttpMethod>>;
  call(endpoint: string, data: Record<string, unknown>): Promise<ApiReply>;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * `api.send` with built-in providers in front (SPEC 13.4): an envelope naming one (`local`) from the platform
 * organization is answered by it, with the endpoint and method checks of SPEC 10.2; every other envelope,
 * a tenant's included, takes the ordinary provider path, where a tenant's own api of that name is its own.
 */
export function withBuiltinProviders(api: ApiSend, builtins: Readonly<Record<string, BuiltinProvider>>, isPlatform: (organizationId: string) => Promise<boolean>): ApiSend {
  return async (envelope, options) => {
    if (!isRecord(envelope) || typeof envelope.api !== 'string' || !Object.hasOwn(builtins, envelope.api)) return api(envelope, options);
    if (typeof envelope.organization_id !== 'string' || !(await isPlatform(envelope.organization_id))) return api(envelope, options);
    const provider = builtins[envelope.api]!;
    const endpoint = typeof envelope.endpoint === 'string' ? envelope.endpoint : '';
    const method = provider.endpoints[endpoint];
    if (!method) throw API_ERRORS.unknownEndpoint(String(envelope.api), endpoint);
    if (envelope.method !== method) throw API_ERRORS.methodMismatch(String(envelope.api), endpoint, method, String(envelope.method));
    if (envelope.data !== undefined && !isRecord(envelope.data)) throw API_ERRORS.invalidEnvelope('data: must be an object');
    return provider.call(endpoint, (envelope.data ?? {}) as Record<string, unknown>);
  };
}
