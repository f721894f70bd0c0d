import { HTTP_METHODS } from '../api/provider.js';
import type { AuthorizedEnvelope } from '../auth/envelope.js';
import { isPlainObject } from '../db/validate.js';
import { MANAGER_ERRORS, clusterRefused } from './errors.js';
import type { ApiSend } from './provider-port.js';

/** A `/manager` envelope that is a provider request: an HTTP verb as its method, and the `api` it calls. */
export const isProviderRequest = (fields: Readonly<Record<string, unknown>>): boolean =>
  typeof fields.api === 'string' && (HTTP_METHODS as readonly unknown[]).includes(fields.method);

/** The cloud a provider request asks for, when its data names one (`cloud`, or `deployment.cloud`). */
function requestedCloud(data: Record<string, unknown> | undefined): unknown {
  if (data?.cloud !== undefined) return data.cloud;
  return isPlainObject(data?.deployment) ? data.deployment.cloud : undefined;
}

/**
 * SPEC 13.3: a provider request `{ api, endpoint, method, data }` through `/manager` takes the `/api` path in
 * the parent's (platform) scope: authorized already on its own method (`post`, ...) against the key's `api`,
 * `endpoint` and `data` restrictions, as `/api` is, then sent by `api.send`. The cloud it asks for must be the
 * API it was authorized for, and a key bound to one cluster names no other. Nothing reaches the provider
 * before these checks pass. The reply is the provider's `{ status, data }`.
 */
export async function sendProviderRequest(api: ApiSend, envelope: AuthorizedEnvelope, bound: string | null): Promise<Record<string, unknown>> {
  if (envelope.data !== undefined && !isPlainObject(envelope.data)) throw MANAGER_ERRORS.invalidEnvelope('data: must be an object');
  const data = envelope.data as Record<string, unknown> | undefined;
  const cloud = requestedCloud(data);
  if (cloud !== undefined && cloud !== envelope.api) {
    throw MANAGER_ERRORS.cloudMismatch('data: the requested cloud', String(cloud).slice(0, 64), String(envelope.api));
  }
  if (bound !== null && data?.cluster_id !== undefined && data.cluster_id !== bound) throw clusterRefused();
  // An api or endpoint the platform does not have is answered as `/api` answers it: a code has one status.
  const reply = await api({ organization_id: envelope.organization_id, api: envelope.api, endpoint: envelope.endpoint, method: envelope.method, ...(data ? { data } : {}) });
  return { status: reply.status, data: reply.data };
}
