import { Value } from '@sinclair/typebox/value';
import { TenancyError } from '../src/auth/errors.js';
import { createKey, listKeys, revokeKey, validateCreateKeyInput, type CreateKeyInput } from '../src/auth/keys.js';
import { firstOrganization } from '../src/auth/organizations.js';
import { Permissions } from '../src/schema/permissions.js';
import { KEY_ID_PATTERN } from '../src/db/documents.js';
import type { Store } from '../src/db/types.js';
import { parseArgs } from 'node:util';
import { STORE_OPTIONS, withStore, withUsage } from './init.js';
import { table } from './table.js';
import { rotateSecretsCommand } from './secrets.js';
import { CliError } from './usage.js';

export const KEYS_USAGE = `Usage: fleetplane keys <create|list|revoke|rotate-secrets> [options]

Manage the keys of an organization (default: the first one, made by "fleetplane init"), or the key that
seals provider and webhook secrets in the store.

  fleetplane keys create --name NAME [--permissions JSON] [--admin] [--host HOST...] [--expires ISO] [--json]
  fleetplane keys list [--json]
  fleetplane keys revoke KEY_ID
  fleetplane keys rotate-secrets [--json]
      seal every secret of every organization with a new key (plain text from earlier versions too), then
      retire the old key; with FLEETPLANE_SECRETS_KEY set, seal them with that key instead (see README)

Options:
  --name NAME         a name for the key (create)
  --permissions JSON  e.g. '{"metrics.read":true,"workflow":{"name":["deploy"]}}' (create)
  --admin             the key may do everything (create)
  --host HOST         only accept the key on this host; repeat for more (create)
  --expires ISO       the key stops working at this time, e.g. 2030-01-01T00:00:00Z (create)
  --org ID            organization id (default: the first organization)
  --json              print JSON (create: {"organization_id","key_id","key"})
  --config PATH       config file (default: ./fleetplane.config.json, or FLEETPLANE_CONFIG)
  --data-dir DIR      data directory (default ./data)
  -h, --help          show this help`;

const OPTIONS = {
  ...STORE_OPTIONS,
  org: { type: 'string' },
  name: { type: 'string' },
  permissions: { type: 'string' },
  admin: { type: 'boolean' },
  host: { type: 'string', multiple: true },
  expires: { type: 'string' },
} as const;

const parse = (argv: string[]) => withUsage(KEYS_USAGE, () => parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: true }));

function parsePermissions(text: string | undefined): Permissions | undefined {
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CliError(`--permissions is not valid JSON: ${(error as Error).message}`, 2);
  }
  if (!Value.Check(Permissions, parsed)) {
    const error = Value.Errors(Permissions, parsed).First();
    throw new CliError(`--permissions: ${error?.path || '/'}: ${error?.message ?? 'invalid'}`, 2);
  }
  return parsed;
}

async function organizationId(store: Store, given: string | undefined): Promise<string> {
  if (given) {
    if (!(await store.collection('organizations').findOne({ _id: given }, { projection: { _id: 1 } }))) throw new CliError(`no organization ${given}`, 2);
    return given;
  }
  const first = await firstOrganization(store);
  if (!first) throw new CliError('the store has no organization yet; run "fleetplane init" first', 1);
  return first._id;
}

/** `out` is where the command prints (stdout; tests pass their own stream). */
export async function keys(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const { values, positionals } = parse(argv);
  const [action, ...rest] = positionals;
  if (values.help || !action) {
    if (!action && !values.help) throw new CliError('missing action: create, list, revoke or rotate-secrets', 2, KEYS_USAGE);
    out.write(`${KEYS_USAGE}\n`);
    return;
  }
  if (action === 'create') return create(values, rest, out);
  if (action === 'list') return list(values, rest, out);
  if (action === 'revoke') return revoke(values, rest, out);
  if (action === 'rotate-secrets') return rotate(values, rest, out);
  throw new CliError(`unknown action "${action}" (create, list, revoke or rotate-secrets)`, 2, KEYS_USAGE);
}

type Values = ReturnType<typeof parse>['values'];

async function create(values: Values, extra: string[], out: NodeJS.WritableStream): Promise<void> {
  if (extra.length > 0) throw new CliError(`unexpected argument "${extra[0]}"`, 2);
  if (!values.name) throw new CliError('--name is required', 2);
  const input: Omit<CreateKeyInput, 'organizationId'> = {
    name: values.name,
    ...(values.admin ? { admin: true } : {}),
    ...(values.permissions !== undefined ? { permissions: parsePermissions(values.permissions) } : {}),
    ...(values.host ? { hosts: values.host } : {}),
    ...(values.expires !== undefined ? { expiresAt: values.expires } : {}),
  };
  // Everything is checked before the store is opened: bad input writes nothing.
  try {
    const checked = validateCreateKeyInput({ organizationId: values.org ?? 'unresolved', ...input });
    if (checked.expiresAt && Date.parse(checked.expiresAt) <= Date.now()) throw new TenancyError(`--expires is in the past: ${values.expires}`);
  } catch (error) {
    if (error instanceof TenancyError) throw new CliError(error.message, 2);
    throw error;
  }
  await withStore(values, async (store) => {
    const created = await createKey(store, { organizationId: await organizationId(store, values.org), ...input });
    if (values.json) out.write(`${JSON.stringify(created)}\n`);
    else out.write(`Key ${created.key_id} "${values.name}" (shown once, store it now):\n${created.key}\n`);
  });
}

async function list(values: Values, extra: string[], out: NodeJS.WritableStream): Promise<void> {
  if (extra.length > 0) throw new CliError(`unexpected argument "${extra[0]}"`, 2);
  await withStore(values, async (store) => {
    const organization_id = await organizationId(store, values.org);
    const found = await listKeys(store, organization_id);
    if (values.json) {
      out.write(`${JSON.stringify({ organization_id, keys: found.map(({ _id, ...rest }) => ({ key_id: _id, ...rest })) })}\n`);
      return;
    }
    const rows = found.map((key) => {
      const state = key.disabled ? 'revoked' : key.expiresAt && Date.parse(key.expiresAt) <= Date.now() ? 'expired' : 'active';
      return [key._id, key.name, key.admin ? 'yes' : 'no', state, key.hosts?.join(',') ?? 'any', key.expiresAt ?? 'never'];
    });
    out.write(`${table(['KEY ID', 'NAME', 'ADMIN', 'STATE', 'HOSTS', 'EXPIRES'], rows)}\n`);
  });
}

async function revoke(values: Values, extra: string[], out: NodeJS.WritableStream): Promise<void> {
  const [keyId, ...more] = extra;
  if (!keyId || more.length > 0) throw new CliError('revoke takes exactly one KEY_ID', 2, KEYS_USAGE);
  if (!new RegExp(KEY_ID_PATTERN).test(keyId)) throw new CliError(`"${keyId}" is not a key id (fpk_...)`, 2);
  await withStore(values, async (store) => {
    const organization_id = await organizationId(store, values.org);
    if (!(await revokeKey(store, organization_id, keyId))) throw new CliError(`no key ${keyId} in organization ${organization_id}`, 2);
    out.write(`revoked ${keyId}\n`);
  });
}

/** Flags of the organization-key actions, which a rotation (of every organization) has no use for. */
const KEY_FLAGS = ['org', 'name', 'permissions', 'admin', 'host', 'expires'] as const;

async function rotate(values: Values, extra: string[], out: NodeJS.WritableStream): Promise<void> {
  if (extra.length > 0) throw new CliError(`unexpected argument "${extra[0]}"`, 2);
  const unused = KEY_FLAGS.find((flag) => values[flag] !== undefined);
  if (unused) throw new CliError(`--${unused} is not used by rotate-secrets (it seals the secrets of every organization)`, 2);
  await rotateSecretsCommand(values, out);
}
