import type { FastifyRequest } from 'fastify';
import type { TenantDirectory } from '../src/auth/directory.js';
import { normalizeHost } from '../src/auth/host.js';
import type { OrganizationDocument } from '../src/db/documents.js';
import { tenantHost } from './authorize.js';

/**
 * The organization of the request's tenant host (null when no organization serves it, or without a directory):
 * from the cache when it answers at once, else from the store.
 */
export function organizationOfRequest(
  directory: Pick<TenantDirectory, 'cachedOrganization' | 'organizationForHost'> | undefined,
  request: FastifyRequest,
): OrganizationDocument | null | Promise<OrganizationDocument | null> {
  const host = normalizeHost(tenantHost(request));
  if (!host || !directory) return null;
  const cached = directory.cachedOrganization(host);
  return cached !== undefined ? cached : directory.organizationForHost(host);
}
