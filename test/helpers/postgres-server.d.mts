import type pg from 'pg';

export interface PostgresServer {
  /** The address it listens on (`listenAddress`, 127.0.0.1 unless given). */
  readonly host: string;
  /** Its port; the same after a restart. */
  readonly port: number;
  /** The database created for the run. */
  readonly database: string;
  /** The superuser's password. */
  readonly password: string;
  /** A connection string to `database` (default: the run's database) as the superuser `postgres`, over TCP. */
  url(database?: string): string;
  /** Runs one statement as the superuser, on the run's database unless `database` names another (through its socket). */
  query(sql: string, values?: unknown[], database?: string): Promise<pg.QueryResult>;
  /** The postmaster's pid while it runs. */
  pid(): number | undefined;
  running(): boolean;
  /** Fast shutdown (clients disconnected), keeping the data directory; `start()` brings it back. */
  stopKeepingData(): Promise<void>;
  /** Starts it again on the same port after `stopKeepingData()`; resolves once it accepts connections. */
  start(): Promise<void>;
  /** `stopKeepingData()` then `start()`. */
  restart(): Promise<void>;
  /** SIGSTOP to the postmaster and every process it forked: it hangs, its sockets stay open. */
  freeze(): Promise<void>;
  /** SIGCONT to the same processes. */
  thaw(): Promise<void>;
  /** Stops the server (fast shutdown) and removes its directory; idempotent. */
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  database?: string;
  /** Extra `-c name=value` settings. */
  settings?: Record<string, string | number>;
  /** The address to listen on (default 127.0.0.1); passwords are accepted from any address. */
  listenAddress?: string;
  /** A network namespace to run the server in (`ip netns exec`; needs root). */
  netns?: string;
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
