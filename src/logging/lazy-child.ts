import type { Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A per-request child logger that is only created when the request actually logs. A pino child costs a
 * couple of microseconds; most requests never log, and on a hot route that is a measurable share of the
 * worker's time.
 */
export class LazyChildLogger {
  private instance: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Record<string, unknown>,
    private readonly options: object,
  ) {}

  private get real(): Logger {
    this.instance ??= this.parent.child(this.bindings, this.options);
    return this.instance;
  }

  get level(): string {
    return this.instance?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real.level = level;
  }

  isLevelEnabled(level: string): boolean {
    const target = this.instance ?? this.parent;
    // Loggers other than pino (test doubles, Fastify's no-op logger) may not know levels: let them decide.
    return typeof target.isLevelEnabled === 'function' ? target.isLevelEnabled(level) : true;
  }

  child(bindings: Record<string, unknown>, options?: object): Logger {
    return this.real.child(bindings, options);
  }

  silent(): void {}
}

for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as Level[]) {
  Object.defineProperty(LazyChildLogger.prototype, level, {
    value(this: LazyChildLogger, ...args: unknown[]) {
      // Below the level, pino would drop the line anyway: do not create the child for nothing.
      if (!this.isLevelEnabled(level)) return;
      const real = (this as unknown as { real: Logger }).real;
      return (real[level] as (...values: unknown[]) => void).apply(real, args);
    },
  });
}

export function lazyChildLogger(parent: Logger, bindings: Record<string, unknown>, options: object): Logger {
  return new LazyChildLogger(parent, bindings, options) as unknown as Logger;
}
