import { pino, type Logger, type DestinationStream } from 'pino';

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

export interface LoggerOptions {
  level?: string;
  name?: string;
  base?: Record<string, unknown>;
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      name: options.name ?? 'fleetplane',
      level: options.level ?? 'info',
      base: { pid: process.pid, ...options.base },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination,
  );
}
