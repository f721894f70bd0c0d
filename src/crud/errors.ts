/** A CRUD envelope refused or failed; `code` and `message` are safe to show to the caller. */
export class CrudError extends Error {
  override readonly name = 'CrudError';
  constructor(
    readonly code: string,
    message: string,
    readonly statusCode: 400 | 403 | 409 | 413 | 503,
  ) {
    super(message);
  }
}
