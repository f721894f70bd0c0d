import { pino, type Logger, type DestinationStream } from 'pino';
import { prettyDestination, type LogFormat } from './pretty.js';

export type { Logger };

/** Paths whose values never reach a log line: transport keys, envelope keys and secrets at any depth we log. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'apikey',
  'key',
  'secret',
  '*.apikey',
  '*.key',
  '*.secret',
  '*.authorization',
  '*.*.apikey',
  '*.*.secret',
];

/** A URL as logged: the path as it is, every query value replaced (a token in a query must not reach the log). */
export function redactedUrl(url: string): string {
  const query = url.indexOf('?');
  return query < 0 ? url : `${url.slice(0, query + 1)}${url.slice(query + 1).replace(/=[^&]*/g, '=[redacted]')}`;
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * Fields of the record itself. Every record carries the emitting process as `worker` (0: the primary); a
 * record about another worker (the primary's "worker crashed") names it `targetWorker`, so no record has
 * the field twice.
 */
function logFields(object: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(object, 'worker')) return object;
  const { worker, ...rest } = object;
  return { ...rest, targetWorker: worker };
}

export interface LoggerOptions {
  level?: string;
  name?: string;
  base?: Record<string, unknown>;
  destination?: DestinationStream;
  /** `pretty`: one readable line per record (to `destination`, else stdout); `json` (the default): JSON lines. */
  format?: LogFormat;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      name: options.name ?? 'fleetplane',
      level: options.level ?? 'info',
      base: { pid: process.pid, ...options.base },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      formatters: { log: logFields },
      serializers: {
        // Fastify's request serializer, with the query's values redacted.
        req: (request: LoggedRequest) => ({
          method: request.method,
          url: request.url === undefined ? undefined : redactedUrl(request.url),
          host: request.host,
          remoteAddress: request.ip,
          remotePort: request.socket?.remotePort,
        }),
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.format === 'pretty' ? prettyDestination(options.destination ?? pino.destination(1)) : options.destination,
  );
}
