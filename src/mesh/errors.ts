/** Why a mesh operation failed; `code` is stable for callers and replies. */
export type MeshErrorCode = 'unavailable' | 'backpressure' | 'too_large' | 'bad_request' | 'timeout';

export class MeshError extends Error {
  override readonly name = 'MeshError';

  constructor(
    readonly code: MeshErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
