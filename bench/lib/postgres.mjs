// A throwaway PostgreSQL server for a benchmark, started as the tests start theirs (test/helpers/postgres-server.mjs):
// a database `bench`; `url(user, password)` connects as another role. Stopped, its directory removed, on exit too.
import { postgresBin, startPostgres as startServer } from '../../test/helpers/postgres-server.mjs';

export { postgresBin };

/** Starts a server with a database `bench`; `settings` are extra `-c name=value`. */
export async function startPostgres({ settings = {}, readyBudgetMs = 30_000 } = {}) {
  const server = await startServer({ database: 'bench', settings: { shared_buffers: '32MB', ...settings }, readyBudgetMs });
  return {
    port: server.port,
    url: (user = 'postgres', secret = server.password) => `postgres://${user}:${secret}@127.0.0.1:${server.port}/bench`,
    query: server.query,
    stop: server.stop,
  };
}
