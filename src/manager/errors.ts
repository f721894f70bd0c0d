import { MANAGER_METHODS } from './envelope.js';
import { FleetplaneError, SHARED_CODES, errorCode, errorEntry, type ErrorCode } from '../errors.js';

/**
 * A refusal or failure of the manager (SPEC 13), with the HTTP status the `/manager` route answers. Messages
 * name the method, collection, cluster, server or provider, never a key or a provider's secret: its 5xx too
 * are the platform's to read (which provider failed, which parent did not answer).
 */
export class ManagerError extends FleetplaneError {
  override readonly name = 'ManagerError';
  constructor(declaration: ErrorCode, message: string) {
    super(declaration.code, message, declaration.statusCode, { expose: true });
  }
}

const entry = <Args extends unknown[]>(declaration: ErrorCode, message: (...args: Args) => string) =>
  errorEntry(declaration, (declared, ...args: Args) => new ManagerError(declared, message(...args)));

/**
 * Every error of the manager, declared once with its status. A provider request naming an api or endpoint the
 * platform does not have answers as `/api` does (404 `unknown_api`, `unknown_endpoint`).
 */
export const MANAGER_ERRORS = {
  invalidEnvelope: entry(SHARED_CODES.invalidEnvelope, (reason: string) => reason),
  unknownMethod: entry(
    SHARED_CODES.unknownMethod,
    (method: string) => `method: "${method}" is not a manager method (${MANAGER_METHODS.join(', ')}, or an HTTP verb with an api for a provider request)`,
  ),
  unknownCollection: entry(errorCode('unknown_collection', 400), (name: string) => `collection: "${name}" is not managed here (servers or clusters)`),
  /** A cloud named in the request that is not the api the key was authorized for; `where` names the field. */
  cloudMismatch: entry(errorCode('cloud_mismatch', 400), (where: string, cloud: string, api: string) => `${where} "${cloud}" is not the authorized api "${api}"`),
  protectedField: entry(errorCode('protected_field', 403), (reason: string) => reason),
  forbidden: entry(SHARED_CODES.forbidden, (reason: string) => reason),
  unknownServer: entry(errorCode('unknown_server', 404), (reason: string) => reason),
  providerFailed: entry(errorCode('provider_failed', 502), (reason: string) => reason),
  providerInvalidReply: entry(errorCode('provider_invalid_reply', 502), () => 'the provider reply has no instanceId'),
  parentFailed: entry(errorCode('parent_failed', 502), (answer: string) => `the manager answered ${answer}`),
  parentUnreachable: entry(errorCode('parent_unreachable', 502), () => 'the manager could not be reached'),
  parentTimeout: entry(errorCode('parent_timeout', 504), (timeoutMs: number) => `the manager did not answer within ${timeoutMs} ms`),
  parentAbandoned: entry(errorCode('parent_abandoned', 503), () => 'the request to the manager was given up before its answer'),
  unmanaged: entry(
    errorCode('unmanaged', 503),
    () => 'this server has no manager: set manager.organizationId, manager.host and manager.apiKey (or keep them in its inventory record)',
  ),
  unavailable: entry(SHARED_CODES.unavailable, (reason: string) => reason),
};

/** The one answer for an unknown cluster and another tenant's cluster: telling them apart would reveal it exists. */
export const clusterRefused = () => MANAGER_ERRORS.forbidden('this request is not authorized here');

/** What a server that manages no fleet answers on `/manager`, naming what it lacks. */
export const MANAGES_NO_FLEET = 'this server manages no fleet: it has no platform organization (set server.organization, or run fleetplane init)';

/** What a server that manages no fleet answers. */
export const managesNoFleet = () => MANAGER_ERRORS.unavailable(MANAGES_NO_FLEET);
