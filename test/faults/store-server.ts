import { createKey, revokeKey } from '../../src/auth/keys.js';
import { createOrganization } from '../../src/auth/organizations.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { PostgresStore } from '../../src/db/postgres/store.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { ServerProcess, request } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';

/** The role and database the server uses: an owner without superuser rights, as in production. */
export const ROLE = 'fleet';
export const PASSWORD = 'fleet-password';

/** Events of a primary whose workers died, were recycled or replaced: none may come while the store is away. */
export const RESTART_EVENTS = new Set(['worker:exit', 'worker:crash', 'worker:restart', 'worker:recycle', 'worker:wedged', 'worker:quarantined', 'fleet:degraded']);

export interface StoreServer {
  pg: PostgresServer;
  server: ServerProcess;
  /** The connection string the server uses (role `fleet`). */
  url: string;
  organizationId: string;
  adminKey: string;
  /** A key made for a test, and its id. */
  newKey(name: string): Promise<{ key: string; keyId: string }>;
  /** Revokes a key through the store, as another host would. */
  revoke(keyId: string): Promise<void>;
  /** The pids of the primary and of the workers that answered `/whoami` (ask a few times to reach both). */
  pids(): Promise<Set<number>>;
  /** Restart-like events since the server was ready. */
  restarts(): string[];
  /** Ends the connections of the server's role (pool and change feed): they must open new ones. */
  cutConnections(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A throwaway PostgreSQL with a database owned by role `fleet`, an organization for `localhost` with an admin key,
 * and a server with two workers on it (FLEETPLANE_POSTGRES_URL).
 */
export async function startStoreServer(settings: Record<string, string | number> = {}): Promise<StoreServer> {
  const pg = await startPostgres({ settings });
  await pg.query(`CREATE ROLE ${ROLE} LOGIN PASSWORD '${PASSWORD}'`, [], 'postgres');
  await pg.query(`CREATE DATABASE ${ROLE} OWNER ${ROLE}`, [], 'postgres');
  const url = `postgres://${ROLE}:${PASSWORD}@${pg.host}:${pg.port}/${ROLE}`;
  // The tables are the role's (it creates them, as the first server would); the test's own writes (keys,
  // revocations) go through the store as another host's would, as the superuser, who connects whatever the role may.
  await (await PostgresStore.connect({ url })).close();
  const admin = await PostgresStore.connect({ url: pg.url(ROLE) });
  await ensureStandardIndexes(admin);
  const organization = await createOrganization(admin, { name: 'acme', hosts: ['localhost'] });
  const newKey = async (name: string) => {
    const created = await createKey(admin, { organizationId: organization._id, name, admin: true });
    return { key: created.key, keyId: created.key_id };
  };
  const adminKey = (await newKey('admin')).key;
  const server = await ServerProcess.start({ workers: { count: 2 } }, { env: { FLEETPLANE_POSTGRES_URL: url } });
  await server.readyWorkers(2);
  const readyAt = server.events.length;
  return {
    pg,
    server,
    url,
    organizationId: organization._id,
    adminKey,
    newKey,
    revoke: async (keyId) => void (await revokeKey(admin, organization._id, keyId)),
    async pids() {
      const pids = new Set<number>([server.child.pid!]);
      await until('both workers to answer /whoami', async () => {
        pids.add((await request(server.port, '/whoami')).json().pid as number);
        return pids.size >= 3 ? true : undefined;
      });
      return pids;
    },
    restarts: () => server.events.slice(readyAt).filter((event) => RESTART_EVENTS.has(String(event.event))).map((event) => String(event.event)),
    // Waits (up to 5 s each) for the backends to be gone: a terminated backend holds its connection slot until it exits.
    cutConnections: async () => void (await pg.query('SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = $1', [ROLE], 'postgres')),
    async stop() {
      await server.stop();
      await admin.close().catch(() => undefined);
      await pg.stop();
    },
  };
}
