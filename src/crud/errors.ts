import { FleetplaneError } from '../errors.js';

/** A CRUD envelope refused or failed; `code` and `message` are safe to show to the caller. */
export class CrudError extends FleetplaneError {
  override readonly name = 'CrudError';
  declare readonly statusCode: 400 | 403 | 409 | 413 | 503;
  constructor(code: string, message: string, statusCode: 400 | 403 | 409 | 413 | 503, options: { cause?: unknown } = {}) {
    super(code, message, statusCode, { expose: true, cause: options.cause });
  }
}
