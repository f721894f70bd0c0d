import type pg from 'pg';

export interface PostgresServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** The database created for the run. */
  readonly database: string;
  /** The superuser's password. */
  readonly password: string;
  /** A connection string to `database` (default: the run's database) as the superuser `postgres`. */
  url(database?: string): string;
  /** Runs one statement as the superuser, on the run's database unless `database` names another. */
  query(sql: string, values?: unknown[], database?: string): Promise<pg.QueryResult>;
  /** Stops the server (fast shutdown) and removes its directory; idempotent. */
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  database?: string;
  /** Extra `-c name=value` settings. */
  settings?: Record<string, string | number>;
  /** How long the server may take to accept connections on a quiet machine. */
  readyBudgetMs?: number;
  /** Registers the synchronous clean-up for the process's exit; returns the function that runs it once. */
  onExit?: (cleanUp: () => void) => () => void;
  scale?: (ms: number) => number;
  describe?: (ms: number) => string;
  env?: NodeJS.ProcessEnv;
}

export function postgresBin(): string | undefined;
export function postgresUnavailable(): string | undefined;
export function startPostgres(options?: StartPostgresOptions): Promise<PostgresServer>;
