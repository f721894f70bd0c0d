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

/** The line an answered error is logged with: its level, its own fields, and a message when it has its own. */
export interface ErrorLogLine {
  level: 'warn' | 'info';
  fields: Readonly<Record<string, unknown>>;
  message?: string;
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

  /**
   * How the error handler logs this error when it answers it, or nothing: a 4xx is the caller's to read and is
   * not logged; an exposed 5xx is a failure on the server's side (a provider, a parent, a step's target) and is
   * logged at warn with its code. An error class adds what it knows (the step, the upstream's status).
   */
  get logLine(): ErrorLogLine | undefined {
    return this.expose && this.statusCode >= 500 ? { level: 'warn', fields: { code: this.code } } : undefined;
  }

  /** Headers the answer carries (`Retry-After`...). */
  get headers(): Readonly<Record<string, string>> | undefined {
    return undefined;
  }

  /** This error with what caused it, for the log (an answer never carries it). */
  withCause(cause: unknown): this {
    // Non-enumerable, as the constructor's `{ cause }` makes it.
    Object.defineProperty(this, 'cause', { value: cause, writable: true, configurable: true, enumerable: false });
    return this;
  }

  /** The answer's body; only meaningful for an exposed error. */
  toBody(): ErrorBody {
    return errorBody(this.code, this.message, this.details);
  }
}

/** What a catalogue declares once for a code: the code and the one HTTP status it answers with. */
export interface ErrorCode<Code extends string = string, Status extends number = number> {
  readonly code: Code;
  readonly statusCode: Status;
}

/** Declares a code with its status; a catalogue entry, or several folders' entries for a shared code, point to it. */
export function errorCode<const Code extends string, const Status extends number>(code: Code, statusCode: Status): ErrorCode<Code, Status> {
  return Object.freeze({ code, statusCode });
}

/**
 * An entry of a folder's error catalogue, in the spirit of fastify's `createError(code, message, statusCode)`:
 * calling it builds the error from its message template's arguments, so a code is always thrown with the status
 * its declaration gives it. `example(...)` is the answer that error gives, for the OpenAPI document.
 */
export interface ErrorEntry<Args extends unknown[], E extends FleetplaneError = FleetplaneError> {
  (...args: Args): E;
  readonly code: string;
  readonly statusCode: number;
  /** The declaration of the code, shared by the entries of every folder that answers with it. */
  readonly declaration: ErrorCode;
  example(...args: Args): ErrorAnswer;
}

/** An entry for `declaration`, built by the folder's error class (which knows its details and headers). */
export function errorEntry<Args extends unknown[], E extends FleetplaneError>(declaration: ErrorCode, build: (declaration: ErrorCode, ...args: Args) => E): ErrorEntry<Args, E> {
  const create = (...args: Args): E => build(declaration, ...args);
  return Object.assign(create, {
    code: declaration.code,
    statusCode: declaration.statusCode,
    declaration,
    example: (...args: Args): ErrorAnswer => create(...args).toBody().error,
  });
}

/** Codes several folders answer with, each with one meaning and one status wherever it is answered. */
export const SHARED_CODES = {
  /** The body or envelope is not what this surface takes. */
  invalidEnvelope: errorCode('invalid_envelope', 400),
  invalidRequest: errorCode('invalid_request', 400),
  /** The envelope's method is not the one this route or endpoint runs. */
  methodMismatch: errorCode('method_mismatch', 400),
  invalidInput: errorCode('invalid_input', 400),
  forbidden: errorCode('forbidden', 403),
  /** What only the platform organization may do. */
  platformOnly: errorCode('platform_only', 403),
  /** What this server does not offer (no store, no providers, no fleet). */
  unavailable: errorCode('unavailable', 503),
  /** The method named has no handler where it was sent (an IPC target, the manager). */
  unknownMethod: errorCode('unknown_method', 404),
} as const;
