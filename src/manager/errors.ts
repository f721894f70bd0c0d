import { FleetplaneError } from '../errors.js';

/**
 * A refusal or failure of the manager (SPEC 13), with the HTTP status the `/manager` route answers. Messages
 * name the method, collection, cluster, server or provider, never a key or a provider's secret: its 5xx too
 * are the platform's to read (which provider failed, which parent did not answer).
 */
export class ManagerError extends FleetplaneError {
  override readonly name = 'ManagerError';
  declare readonly code: ManagerErrorCode;
  declare readonly statusCode: 400 | 403 | 404 | 409 | 502 | 503 | 504;
  constructor(code: ManagerErrorCode, message: string, statusCode: 400 | 403 | 404 | 409 | 502 | 503 | 504, options?: { cause?: unknown }) {
    super(code, message, statusCode, { expose: true, cause: options?.cause });
  }
}

export type ManagerErrorCode =
  | 'invalid_envelope'
  | 'unknown_method'
  | 'unknown_collection'
  | 'protected_field'
  | 'forbidden'
  | 'cloud_mismatch'
  | 'unknown_server'
  | 'provider_failed'
  | 'provider_invalid_reply'
  | 'parent_failed'
  | 'parent_unreachable'
  | 'parent_timeout'
  | 'parent_abandoned'
  | 'unmanaged'
  | 'unknown_api'
  | 'unknown_endpoint'
  | 'unavailable';

/** The one answer for an unknown cluster and another tenant's cluster: telling them apart would reveal it exists. */
export const clusterRefused = () => new ManagerError('forbidden', 'this request is not authorized here', 403);

/** What a server that manages no fleet answers on `/manager`, naming what it lacks. */
export const MANAGES_NO_FLEET = 'this server manages no fleet: it has no platform organization (set server.organization, or run fleetplane init)';
