import { parseArgs } from 'node:util';
import { TenancyError } from '../src/auth/errors.js';
import { normalizeHosts } from '../src/auth/host.js';
import { createOrganization, ORGANIZATION_ID_PATTERN } from '../src/auth/organizations.js';
import type { OrganizationDocument } from '../src/db/documents.js';
import type { Store } from '../src/db/types.js';
import { describeStore, STORE_OPTIONS, withStore, withUsage } from './init.js';
import { table } from './table.js';
import { CliError } from './usage.js';

export const ORGS_USAGE = `Usage: fleetplane orgs <create|list> [options]

Create or list the organizations of a store. The first organization of a store (made by "fleetplane init"
or the first start) is its platform organization; the others are its tenants.

  fleetplane orgs create NAME --host HOST... [--id ID] [--json]
  fleetplane orgs list [--json]

Options:
  --host HOST      a host name that reaches the organization; repeat for more (create, required)
  --id ID          the id the organization already has in another store, e.g. a tenant's id on its parent
                   (create; 24 hex digits, as "orgs create --json" printed it; default: a new id)
  --json           print JSON (create: {"organization_id","name","hosts","platform"}; list: a list of them)
  --config PATH    config file (default: ./fleetplane.config.json, or FLEETPLANE_CONFIG)
  --data-dir DIR   data directory (default ./data)
  -h, --help       show this help`;

const OPTIONS = { ...STORE_OPTIONS, host: { type: 'string', multiple: true }, id: { type: 'string' } } as const;
const parse = (argv: string[]) => withUsage(ORGS_USAGE, () => parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: true }));
type Values = ReturnType<typeof parse>['values'];

/** An organization as `orgs` prints it. */
const shown = (organization: OrganizationDocument) => ({
  organization_id: organization._id,
  name: organization.name,
  hosts: organization.hosts,
  platform: organization.platform === true,
});

/** `out` is where the command prints (stdout; tests pass their own stream). */
export async function orgs(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const { values, positionals } = parse(argv);
  const [action, ...rest] = positionals;
  if (values.help) {
    out.write(`${ORGS_USAGE}\n`);
    return;
  }
  if (action === 'create') return create(values, rest, out);
  if (action === 'list') return list(values, rest, out);
  throw new CliError(action ? `unknown action "${action}" (create or list)` : 'missing action: create or list', 2, ORGS_USAGE);
}

/**
 * Checks the input before the store is opened, then refuses, naming it, an organization that exists already:
 * the same id, the same name, or one of the hosts served by another organization.
 */
async function create(values: Values, extra: string[], out: NodeJS.WritableStream): Promise<void> {
  const [name, ...more] = extra;
  if (!name) throw new CliError('create takes the organization NAME, e.g. "fleetplane orgs create acme --host acme.example.com"', 2, ORGS_USAGE);
  if (more.length > 0) throw new CliError(`unexpected argument "${more[0]}"`, 2);
  if (name.length > 128) throw new CliError('NAME must be 1 to 128 characters', 2);
  if (values.host === undefined) throw new CliError('--host is required: the host names that reach the organization', 2);
  const hosts = normalizeHosts(values.host);
  if (!hosts || hosts.length === 0) throw new CliError(`--host must be host names (got ${values.host.join(', ')})`, 2);
  const id = values.id;
  if (id !== undefined && !ORGANIZATION_ID_PATTERN.test(id)) throw new CliError(`--id takes an organization id as another store printed it (24 hex digits), got "${id}"`, 2);
  await withStore(values, async (store, config) => {
    const where = describeStore(config);
    await refuseExisting(store, { id, name, hosts }, where);
    let created: OrganizationDocument;
    try {
      created = await createOrganization(store, { name, hosts }, { id });
    } catch (error) {
      // Another process took a host (or the id) between the check and the write.
      if (error instanceof TenancyError) throw new CliError(`${error.message} (${where})`, 1);
      throw error;
    }
    if (values.json) {
      out.write(`${JSON.stringify(shown(created))}\n`);
      return;
    }
    const role = created.platform ? ', the platform organization of this store' : '';
    out.write(`Created organization "${name}" (${created._id}) for ${hosts.join(', ')}${role}.\n`);
  });
}

async function refuseExisting(store: Store, wanted: { id?: string; name: string; hosts: string[] }, where: string): Promise<void> {
  const existing = await store.collection<OrganizationDocument>('organizations').find({}, { projection: { _id: 1, name: 1, hosts: 1 } });
  const sameId = wanted.id === undefined ? undefined : existing.find((organization) => organization._id === wanted.id);
  if (sameId) throw new CliError(`organization ${sameId._id} ("${sameId.name}") already exists in ${where}`, 1);
  const sameName = existing.find((organization) => organization.name === wanted.name);
  if (sameName) throw new CliError(`organization "${wanted.name}" already exists in ${where} (${sameName._id})`, 1);
  for (const host of wanted.hosts) {
    const owner = existing.find((organization) => organization.hosts.includes(host));
    if (owner) throw new CliError(`host ${host} is already served by organization "${owner.name}" (${owner._id}) in ${where}`, 1);
  }
}

async function list(values: Values, extra: string[], out: NodeJS.WritableStream): Promise<void> {
  if (extra.length > 0) throw new CliError(`unexpected argument "${extra[0]}"`, 2);
  const unused = (['host', 'id'] as const).find((flag) => values[flag] !== undefined);
  if (unused) throw new CliError(`--${unused} is not used by list`, 2);
  await withStore(values, async (store) => {
    const found = await store.collection<OrganizationDocument>('organizations').find({}, { sort: { _id: 1 } });
    if (values.json) {
      out.write(`${JSON.stringify(found.map(shown))}\n`);
      return;
    }
    const rows = found.map((organization) => [organization._id, organization.name, organization.platform ? 'yes' : 'no', organization.hosts.join(',')]);
    out.write(`${table(['ORGANIZATION ID', 'NAME', 'PLATFORM', 'HOSTS'], rows)}\n`);
  });
}
