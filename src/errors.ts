/** What an error answer says: a stable `code`, a `message`, and the fields some errors add (`step`, `upstreamStatus`). */
export interface ErrorAnswer {
  code: string;
  message: string;
  [field: string]: unknown;
}

/** The one error shape of every answer (HTTP bodies, raw socket answers, WebSocket frames carry its `error`). */
export interface ErrorBody {
  error: ErrorAnswer;
}

/** `{ code, message, ...details }`: what a WebSocket frame or an IPC reply carries as its `error`. */
export function errorAnswer(code: string, message: string, details?: Readonly<Record<string, unknown>>): ErrorAnswer {
  return details ? { code, message, ...details } : { code, message };
}

/** `{ error: { code, message, ...details } }`: built here only, so every writer of an error answer agrees. */
export function errorBody(code: string, message: string, details?: Readonly<Record<string, unknown>>): ErrorBody {
  return { error: errorAnswer(code, message, details) };
}

export interface FleetplaneErrorOptions {
  /** Whether the message may be shown to the caller; by default only a 4xx's is. */
  expose?: boolean;
  cause?: unknown;
}

/**
 * The base of every domain error: a stable `code`, the HTTP `statusCode` it answers with, and whether its
 * message is safe to show (`expose`). An exposed error is answered `{ error: { code, message, ...details } }`
 * with its status; any other is a server failure, answered without its message and logged in full.
 */
export class FleetplaneError extends Error {
  override readonly name: string = 'FleetplaneError';
  readonly expose: boolean;
  constructor(
    readonly code: string,
    message: string,
    readonly statusCode: number = 500,
    options: FleetplaneErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.expose = options.expose ?? statusCode < 500;
  }

  /** Fields the answer carries besides `code` and `message`. */
  get details(): Readonly<Record<string, unknown>> | undefined {
    return undefined;
  }

  /** Headers the answer carries (`Retry-After`...). */
  get headers(): Readonly<Record<string, string>> | undefined {
    return undefined;
  }

  /** The answer's body; only meaningful for an exposed error. */
  toBody(): ErrorBody {
    return errorBody(this.code, this.message, this.details);
  }
}
