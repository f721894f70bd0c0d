import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseUntrustedJson } from '../src/api/untrusted-json.js';
import { firstOrganization } from '../src/auth/organizations.js';
import { planApply, type AppliedResource } from '../src/crud/apply-resources.js';
import { ResourceFileError, validateResourceFile, type ResourceFile } from '../src/crud/resources.js';
import type { Store } from '../src/db/types.js';
import { loadConfig } from '../src/config/load.js';
import { secretsIn } from '../src/secrets/fields.js';
import { SealedStore } from '../src/secrets/sealed-store.js';
import { SecretKeyError } from '../src/secrets/errors.js';
import { asCliError, keyringFor } from './secrets.js';
import { STORE_OPTIONS, withStore, withUsage } from './init.js';
import { CliError } from './usage.js';

export const APPLY_USAGE = `Usage: fleetplane apply -f FILE [options]

Create or update declarative resources by name from a JSON file:
  { "apis": [...], "workflows": [...], "webhooks": [...], "servers_config": [...], "organizations": [...] }
Each resource replaces the stored one of the same name. The whole file is checked before anything is
written. Prints what was created, changed (with the fields) or left unchanged; secret values never.

Options:
  -f, --file FILE     the resource file (JSON)
  --org ID            organization of apis, workflows, webhooks and servers_config
                      (default: the first one, made by "fleetplane init")
  --dry-run           check the file against the store and print what would change; write nothing
  --json              print one JSON object
  --config PATH       config file (default: ./fleetplane.config.json, or FLEETPLANE_CONFIG)
  --data-dir DIR      data directory (default ./data)
  -h, --help          show this help`;

/** The file, parsed and fully validated; every problem is a one-line CliError (exit 2). */
export function readResourceFile(file: string): ResourceFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, 2);
  }
  let parsed: unknown;
  try {
    parsed = parseUntrustedJson(text);
  } catch (error) {
    throw new CliError(`${file} is not valid JSON: ${(error as Error).message}`, 2);
  }
  try {
    return validateResourceFile(parsed);
  } catch (error) {
    if (error instanceof ResourceFileError) throw new CliError(`${file}: ${error.message}`, 2);
    throw error;
  }
}

async function organizationId(store: Store, given: string | undefined): Promise<string> {
  if (given !== undefined) {
    if (!(await store.collection('organizations').findOne({ _id: given }, { projection: { _id: 1 } }))) throw new CliError(`no organization ${given}`, 2);
    return given;
  }
  const first = await firstOrganization(store);
  if (!first) throw new CliError('the store has no organization yet; run "fleetplane init" first', 1);
  return first._id;
}

const holdsSecrets = (file: ResourceFile) =>
  (['apis', 'webhooks'] as const).some((kind) => (file[kind] ?? []).some((resource) => secretsIn(kind, resource).length > 0));

function summary(resources: AppliedResource[]): string {
  const count = (outcome: AppliedResource['outcome']) => resources.filter((resource) => resource.outcome === outcome).length;
  return `${resources.length} resource${resources.length === 1 ? '' : 's'}: ${count('created')} created, ${count('changed')} changed, ${count('unchanged')} unchanged`;
}

/** `out` is where the command prints (stdout; tests pass their own stream). */
export async function apply(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const options = { ...STORE_OPTIONS, file: { type: 'string', short: 'f' }, org: { type: 'string' }, 'dry-run': { type: 'boolean' } } as const;
  const { values } = withUsage(APPLY_USAGE, () => parseArgs({ args: argv, options, strict: true }));
  if (values.help) {
    out.write(`${APPLY_USAGE}\n`);
    return;
  }
  if (!values.file) throw new CliError('missing -f FILE', 2, APPLY_USAGE);
  const file = readResourceFile(values.file);
  // Checked before the store is opened: a bad secrets key refuses the file with nothing written.
  const secrets = keyringFor(loadConfig({ flags: { config: values.config, dataDir: values['data-dir'] } }).config);
  await withStore(values, async (raw) => {
    const store = new SealedStore(raw, secrets);
    const organization = await organizationId(store, values.org);
    let plan;
    try {
      plan = await planApply(store, organization, file, undefined, secrets);
    } catch (error) {
      if (error instanceof ResourceFileError) throw new CliError(`${values.file}: ${error.message}`, 2);
      throw error;
    }
    const dryRun = values['dry-run'] === true;
    try {
      // The key file is made (or found unusable) before the first write, not half-way through them.
      if (holdsSecrets(file) && !dryRun) secrets.sealingKeyId();
    } catch (error) {
      if (error instanceof SecretKeyError) throw asCliError(error);
      throw error;
    }
    if (!dryRun) await plan.write();
    if (values.json) {
      out.write(`${JSON.stringify({ organization_id: organization, ...(dryRun ? { dryRun: true } : {}), resources: plan.resources, notes: plan.notes })}\n`);
      return;
    }
    const lines = [`organization ${organization}${dryRun ? ' (dry run: nothing written)' : ''}`];
    for (const resource of plan.resources) {
      const fields = resource.fields ? ` (${resource.fields.join(', ')})` : '';
      lines.push(`  ${resource.outcome.padEnd(9)} ${resource.kind}/${resource.name}${fields}`);
    }
    for (const note of plan.notes) lines.push(`  note: ${note}`);
    lines.push(`${summary(plan.resources)}${dryRun ? ' would be written' : ''}`);
    out.write(`${lines.join('\n')}\n`);
  });
}
