import type { PoolClient } from 'pg';
import { StoreError } from '../errors.js';
import { MIN_SERVER_VERSION } from './settings.js';

const SCHEMA_VERSION = 1;
/** `pg_advisory_xact_lock` key of the schema's creation ("fleetpla" in ASCII): processes starting at once take turns. */
const SCHEMA_LOCK = 0x666c656574706c61n;

/**
 * One table holds every collection's documents (a `collection` column), as in the embedded file, rather than a
 * table per collection: tenants create collections through /crud at run time, and a table each would mean DDL
 * (exclusive locks, the CREATE right) on a live server, one more catalog entry per tenant collection, and names
 * mapped to PostgreSQL's 63-byte identifiers. `seq` keeps insertion order for scans; the GIN index answers the
 * containment conditions equality filters are pushed down as (pushdown.ts).
 *
 * Unique indexes are rows of `fleetplane_unique_keys`, whose primary key is the real unique index the server
 * enforces across every process and host. An expression index on the document cannot be one: a MongoDB unique
 * index is multikey (`organizations.hosts` makes each host in the array unique, an index on `doc->'hosts'`
 * would compare whole arrays), and it counts a missing field as null. The key is the JSON of the indexed values
 * (indexes.ts, shared with the embedded store); its SHA-256 is what is indexed, since a B-tree entry cannot
 * exceed ~2.7 kB and an indexed value may be longer. The key rows go with their document (`ON DELETE CASCADE`).
 *
 * `fleetplane_collection_versions` holds the per-collection write counters caches compare (`changeToken`); its
 * row is also each collection's write lock (store.ts).
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS fleetplane_documents (
  collection text NOT NULL,
  id text NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  doc jsonb NOT NULL,
  PRIMARY KEY (collection, id)
);
CREATE INDEX IF NOT EXISTS fleetplane_documents_order ON fleetplane_documents (collection, seq);
CREATE INDEX IF NOT EXISTS fleetplane_documents_contents ON fleetplane_documents USING gin (doc jsonb_path_ops);
CREATE TABLE IF NOT EXISTS fleetplane_unique_keys (
  collection text NOT NULL,
  index_name text NOT NULL,
  digest bytea NOT NULL,
  key text NOT NULL,
  doc_id text NOT NULL,
  PRIMARY KEY (collection, index_name, digest),
  FOREIGN KEY (collection, doc_id) REFERENCES fleetplane_documents (collection, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS fleetplane_unique_keys_by_document ON fleetplane_unique_keys (collection, doc_id);
CREATE TABLE IF NOT EXISTS fleetplane_indexes (
  collection text NOT NULL,
  name text NOT NULL,
  spec text NOT NULL,
  PRIMARY KEY (collection, name)
);
CREATE TABLE IF NOT EXISTS fleetplane_collection_versions (
  collection text PRIMARY KEY,
  version bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS fleetplane_schema (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version integer NOT NULL
);
`;

/** Refuses a server older than `MIN_SERVER_VERSION`; answers its version (e.g. 150018 for 15.18). */
export async function assertSupportedServer(client: PoolClient): Promise<number> {
  const { rows } = await client.query<{ version: string }>("SELECT current_setting('server_version_num') AS version");
  const version = Number(rows[0]?.version);
  if (!Number.isFinite(version)) throw new StoreError('PostgreSQL did not report its version', 'store_unsupported');
  if (version < MIN_SERVER_VERSION * 10_000) {
    const shown = `${Math.floor(version / 10_000)}.${version % 10_000}`;
    throw new StoreError(`PostgreSQL ${shown} is too old: fleetplane needs PostgreSQL ${MIN_SERVER_VERSION} or later`, 'store_unsupported');
  }
  return version;
}

/**
 * Reads pg_class rather than asking `to_regclass`: a name lookup goes through the session's catalog cache, which
 * may not yet have heard of a table another session created and committed while this one waited for the
 * advisory lock (it then reports it missing, and the creation runs twice); a query of pg_class reads a snapshot
 * taken after the lock was granted.
 */
async function installedVersion(client: PoolClient): Promise<number | undefined> {
  const { rows } = await client.query<{ present: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relname = 'fleetplane_schema' AND n.nspname = current_schema()) AS present`,
  );
  if (!rows[0]?.present) return undefined;
  const found = await client.query<{ version: number }>('SELECT version FROM fleetplane_schema');
  return found.rows[0]?.version;
}

/**
 * Creates the tables when they are missing (every process may call it at start: the first one creates them
 * under an advisory lock, the others find them). A database already at this version needs no DDL, so a role
 * without the CREATE right works on tables an owner created once.
 */
export async function ensureSchema(client: PoolClient): Promise<void> {
  let version = await installedVersion(client);
  if (version === undefined) {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK.toString()]);
      version = await installedVersion(client);
      if (version === undefined) {
        await client.query(SCHEMA);
        await client.query('INSERT INTO fleetplane_schema (version) VALUES ($1)', [SCHEMA_VERSION]);
        version = SCHEMA_VERSION;
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }
  if (version > SCHEMA_VERSION) throw new StoreError(`the PostgreSQL database was written by a newer version of fleetplane (schema ${version})`, 'schema_too_new');
}
