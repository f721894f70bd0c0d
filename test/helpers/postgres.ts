/**
 * A real PostgreSQL server for a test file (see postgres-server.mjs), with the test run's budgets: its waits
 * stretched by the time scale, and stopped with its directory removed when the file ends, however it ends — a
 * timeout's SIGALRM skips every teardown, so the exit handlers of ../faults/cleanup.ts do it then.
 */
import { undoOnExit } from '../faults/cleanup.js';
import { TEST_ENV } from './processes.js';
import { startPostgres as startServer, type PostgresServer, type StartPostgresOptions } from './postgres-server.mjs';
import { budgetText, scaled } from './wait.js';

export { postgresBin, postgresUnavailable, type PostgresServer } from './postgres-server.mjs';

/** A few connections more than the tests open (3 processes' pools and listeners, and the test's own). */
const TEST_SETTINGS: Record<string, string | number> = { max_connections: 40 };

/** Starts a server (`listenAddress`, `netns` as postgres-server.mjs takes them); the caller stops it with `stop()` in its teardown. */
export function startPostgres(options: Omit<StartPostgresOptions, 'onExit' | 'scale' | 'describe' | 'env'> = {}): Promise<PostgresServer> {
  return startServer({
    ...options,
    settings: { ...TEST_SETTINGS, ...options.settings },
    onExit: undoOnExit,
    scale: scaled,
    describe: budgetText,
    env: { ...process.env, ...TEST_ENV },
  });
}
