import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AlreadyInitializedError, initializeStore, isInitialized } from '../src/auth/bootstrap.js';
import { normalizeHosts } from '../src/auth/host.js';
import { localHosts, ORGANIZATION_ID_PATTERN } from '../src/auth/organizations.js';
import { loadConfig } from '../src/config/load.js';
import type { ResolvedConfig } from '../src/config/schema.js';
import { databaseName } from '../src/db/mongodb/settings.js';
import { embeddedStorePath, openStore, storeBackendOf, type StoreConfig } from '../src/db/open.js';
import { describeConnection } from '../src/db/postgres/settings.js';
import type { Store } from '../src/db/types.js';
import { CliError, withUsage } from './usage.js';

export const ADMIN_KEY_FILE = 'admin.key';

export const INIT_USAGE = `Usage: fleetplane init [options]

Create the first organization of a new store (its platform organization) and an admin key, and print the
key once. More organizations: "fleetplane orgs create".

Options:
  --org NAME          organization name (default "default")
  --host HOST         a host name that reaches the organization; repeat for more
                      (default: localhost, 127.0.0.1, ::1 and this machine's name)
  --id ID             the id the organization already has in another store, e.g. a tenant's id on its
                      parent, for a tenant cluster's own store (24 hex digits; default: a new id)
  --json              print {"organization_id","key_id","key"} as one JSON object
  --config PATH       config file (default: ./fleetplane.config.json, or FLEETPLANE_CONFIG)
  --data-dir DIR      data directory (default ./data)
  -h, --help          show this help`;

type Options = NonNullable<ParseArgsConfig['options']>;
export const STORE_OPTIONS = {
  config: { type: 'string' },
  'data-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Options;

export { withUsage } from './usage.js';

export function describeStore(config: StoreConfig): string {
  const { url, database } = config.mongodb;
  if (config.postgres?.url) return `PostgreSQL database ${describeConnection(config.postgres.url)}`;
  return url ? `MongoDB database "${databaseName({ url, database })}"` : embeddedStorePath(config);
}

/**
 * Loads the config like `start` does, opens the store, runs `work`, and always closes the store. Only `init`
 * (`create`) may bring an embedded store into being: every other command works on one that exists, so a
 * mistyped `--data-dir` is an error instead of a new empty store.
 */
export async function withStore<T>(
  values: { config?: string; 'data-dir'?: string },
  work: (store: Store, config: ResolvedConfig) => Promise<T>,
  options: { create?: boolean } = {},
): Promise<T> {
  const { config } = loadConfig({ flags: { config: values.config, dataDir: values['data-dir'] } });
  if (!options.create && storeBackendOf(config) === 'embedded' && !existsSync(embeddedStorePath(config))) {
    throw new CliError(`no store at ${embeddedStorePath(config)}: give the --data-dir (or --config) of an initialized server, or run "fleetplane init"`, 1);
  }
  let store: Store;
  try {
    store = await openStore(config);
  } catch (error) {
    throw new CliError(`cannot open the store (${describeStore(config)}): ${(error as Error).message}`, 1);
  }
  try {
    return await work(store, config);
  } finally {
    await store.close();
  }
}

/** `out` is where the command prints (stdout; tests pass their own stream). */
export async function init(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const options = { ...STORE_OPTIONS, org: { type: 'string' }, host: { type: 'string', multiple: true }, id: { type: 'string' } } as const;
  const { values } = withUsage(INIT_USAGE, () => parseArgs({ args: argv, options, strict: true }));
  if (values.help) {
    out.write(`${INIT_USAGE}\n`);
    return;
  }
  const name = values.org ?? 'default';
  if (name.length === 0 || name.length > 128) throw new CliError('--org must be 1 to 128 characters', 2);
  const hosts = values.host ? normalizeHosts(values.host) : localHosts();
  if (!hosts || hosts.length === 0) throw new CliError(`--host must be host names (got ${values.host?.join(', ')})`, 2);
  if (values.id !== undefined && !ORGANIZATION_ID_PATTERN.test(values.id)) throw new CliError(`--id takes an organization id as another store printed it (24 hex digits), got "${values.id}"`, 2);
  await withStore(values, async (store, config) => {
    let created;
    try {
      created = await initializeStore(store, { name, hosts }, { id: values.id });
    } catch (error) {
      if (error instanceof AlreadyInitializedError) {
        throw new CliError(`the store (${describeStore(config)}) is already initialized; add an organization with "fleetplane orgs create", a key with "fleetplane keys create"`, 1);
      }
      throw error;
    }
    if (values.json) {
      out.write(`${JSON.stringify(created)}\n`);
      return;
    }
    out.write(
      `Created organization "${name}" (${created.organization_id}) for ${hosts.join(', ')}.\n` +
        `Admin key ${created.key_id} (shown once, store it now):\n${created.key}\n`,
    );
  }, { create: true });
}

/**
 * `start` on an empty store: organization "default" for this machine's names and an admin key, written to
 * `<dataDir>/admin.key` (0600) before anything is said, so a start that fails later has not lost the key. The
 * key itself is printed only to a terminal: a service manager or log collector on stdout gets where it was
 * saved instead. Never through the logger: the key must not be logged.
 */
export async function autoInitialize(config: ResolvedConfig, out: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout): Promise<void> {
  // The store may live elsewhere (`db.path`); the key file is always in the data directory.
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const store = await openStore(config);
  try {
    if (await isInitialized(store)) return;
    let created;
    try {
      created = await initializeStore(store, { name: 'default', hosts: localHosts() });
    } catch (error) {
      if (error instanceof AlreadyInitializedError) return;
      throw error;
    }
    const file = path.join(config.dataDir, ADMIN_KEY_FILE);
    writeFileSync(file, `${created.key}\n`, { mode: 0o600 });
    chmodSync(file, 0o600);
    const made = `fleetplane: created organization "default" (${created.organization_id}) and admin key ${created.key_id}, saved to ${file} (mode 0600)`;
    out.write(out.isTTY ? `${made}:\n${created.key}\n` : `${made}; read it from there.\n`);
  } finally {
    await store.close();
  }
}
