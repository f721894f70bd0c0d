import { InvalidInputError, StoreError, StoreUnavailableError } from '../errors.js';
import { redactCredentials } from './settings.js';

/**
 * SQLSTATEs of a server that cannot answer now: shutting down or starting (57P01-57P03), out of connections
 * (53300), a statement or transaction cut short by its time limit (57014, 25P03), a broken connection (08xxx).
 * The operation may be retried; a write may or may not have happened.
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '57014', '25P03', '08000', '08001', '08003', '08004', '08006', '08007', '53200']);
/** Another writer held the collection's lock past `lock_timeout`, or the server chose this transaction to fail. */
const BUSY_STATES = new Set(['55P03', '40001', '40P01']);
/** Values the server cannot take (they pass the store's own validation only through a gap in it). */
const INVALID_STATES = new Set(['22P02', '22P05', '22021', '54000', '54001']);
/** The server refuses the role: credentials, database, rights. Retrying changes nothing. */
const MISCONFIGURED_STATES = new Set(['28000', '28P01', '3D000', '42501', '42P01', '3F000']);
/**
 * Errors of the socket or of the client's own limits: the server could not be reached or did not answer. A host
 * name that stops resolving at run time is taken for a passing DNS failure; at start it is refused (`connectError`).
 */
const UNREACHABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'EAI_AGAIN', 'ECONNABORTED', 'ENOTFOUND']);
const UNREACHABLE_MESSAGES = [
  /Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Query read timeout/i,
  /not queryable/i,
  /Connection ended/i,
];

type PgError = Error & { code?: string; detail?: string; constraint?: string };

const sqlState = (error: unknown): string | undefined => {
  const code = (error as PgError)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
};

/** The server or the network failed (rather than the statement): worth a retry and a 503. */
export function isUnreachable(error: unknown): boolean {
  const code = (error as PgError)?.code;
  const state = sqlState(error);
  if (state) return UNAVAILABLE_STATES.has(state) || state.startsWith('08');
  if (typeof code === 'string' && UNREACHABLE_NODE_CODES.has(code)) return true;
  const message = (error as Error)?.message ?? '';
  return UNREACHABLE_MESSAGES.some((pattern) => pattern.test(message));
}

/**
 * The client's errors as the store's typed ones, so callers handle every backend alike: the caller's mistakes
 * are 4xx, an unreachable, slow or busy server is 503, anything else 500. Duplicate keys never get here as
 * errors: the backend finds them itself (see collection.ts).
 */
export function toStoreError(collection: string, error: unknown): Error {
  if (error instanceof StoreError) return error;
  const message = redactCredentials((error as Error)?.message ?? String(error));
  const state = sqlState(error);
  if (state && BUSY_STATES.has(state)) {
    return new StoreError(`PostgreSQL ${collection}: another writer held the collection too long (${state}): ${message}`, 'store_busy', { cause: error });
  }
  if (state === '53100') return new StoreError(`PostgreSQL ${collection}: the server's disk is full: the write was not made`, 'store_full', { cause: error });
  if (state && INVALID_STATES.has(state)) return new InvalidInputError(`PostgreSQL ${collection}: ${message}`, { cause: error });
  if (state && MISCONFIGURED_STATES.has(state)) return new StoreError(`PostgreSQL ${collection}: ${message} (${state})`, 'store_misconfigured', { cause: error });
  if (isUnreachable(error)) return new StoreUnavailableError(`PostgreSQL ${collection} is unavailable: ${message}`, { cause: error });
  return new StoreError(`PostgreSQL ${collection}: ${message}${state ? ` (${state})` : ''}`, 'store_error', { cause: error });
}

/**
 * A failure to connect at start, as one line naming the problem: retried (`StoreUnavailableError`) while the
 * server is unreachable, starting or out of connections; refused at once (`store_misconfigured`) for what
 * waiting cannot fix — a host name that does not resolve, wrong credentials, a missing database, no rights.
 */
export function connectError(where: string, error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  const message = redactCredentials((error as Error)?.message ?? String(error));
  const state = sqlState(error);
  const code = (error as PgError)?.code;
  if (state === '28P01' || state === '28000') return new StoreError(`PostgreSQL ${where} refused the credentials: ${message}`, 'store_misconfigured', { cause: error });
  if (state === '3D000') return new StoreError(`PostgreSQL ${where}: ${message}: create it first (createdb) or name another in postgres.url`, 'store_misconfigured', { cause: error });
  if (state === '42501') return new StoreError(`PostgreSQL ${where}: the role lacks a right fleetplane needs: ${message}`, 'store_misconfigured', { cause: error });
  if (code === 'ENOTFOUND') return new StoreError(`PostgreSQL ${where}: the host name does not resolve: ${message}`, 'store_misconfigured', { cause: error });
  if (isUnreachable(error)) return new StoreUnavailableError(`cannot connect to PostgreSQL ${where}: ${message}`, { cause: error });
  return new StoreError(`cannot connect to PostgreSQL ${where}: ${message}${state ? ` (${state})` : ''}`, 'store_misconfigured', { cause: error });
}
