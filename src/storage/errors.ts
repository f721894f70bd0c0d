import { FleetplaneError, errorCode, type ErrorCode } from '../errors.js';

export const STORAGE_ERROR_CODES = [
  'E_STORAGE_KEY_INVALID',
  'E_STORAGE_KEY_TOO_LONG',
  'E_STORAGE_VALUE_NOT_JSON',
  'E_STORAGE_VALUE_TOO_LARGE',
  'E_STORAGE_VALUE_TOO_DEEP',
  'E_STORAGE_BAD_MESSAGE',
  'E_STORAGE_TIMEOUT',
  'E_STORAGE_UNAVAILABLE',
  'E_STORAGE_INTERNAL',
] as const;

export type StorageErrorCode = (typeof STORAGE_ERROR_CODES)[number];

/**
 * Each code declared once with its status: every failure of the cluster storage is 500 to an HTTP caller (the
 * storage is the server's own; its callers are handlers and services, which answer with their own codes).
 */
export const STORAGE_CODES = Object.fromEntries(STORAGE_ERROR_CODES.map((code) => [code, errorCode(code, 500)])) as Readonly<Record<StorageErrorCode, ErrorCode>>;

/** Every failure of the cluster storage, in the calling process, whichever process detected it. */
export class StorageError extends FleetplaneError {
  override readonly name = 'StorageError';
  declare readonly code: StorageErrorCode;
  constructor(code: StorageErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, STORAGE_CODES[code].statusCode, options);
  }
}
