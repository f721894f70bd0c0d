import t from 'tap';
import path from 'node:path';
import { init } from '../../cli/init.js';
import { orgs } from '../../cli/orgs.js';
import { Authorizer } from '../../src/auth/authorize.js';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open.js';
import { firstLine, output, runCli, tempDir } from './fixtures/cli.js';

t.setTimeout(300_000);

const configFor = (dataDir: string) => loadConfig({ env: {}, object: { dataDir } }).config;

/** Runs `orgs` in this process and returns what it printed, parsed when it printed JSON. */
async function run(argv: string[]): Promise<string> {
  const printed = output();
  await orgs(argv, printed.stream);
  return printed.text();
}

async function initialized(): Promise<{ dataDir: string; platform: string }> {
  const dataDir = tempDir();
  const printed = output();
  await init(['--json', '--org', 'platform', '--host', 'localhost', '--data-dir', dataDir], printed.stream);
  return { dataDir, platform: JSON.parse(printed.text()).organization_id };
}

t.test('orgs create adds a tenant to an initialized store; init --id gives a new store the same organization, and a key made there works on its host', async (t) => {
  const parent = await initialized();
  const created = JSON.parse(await run(['create', 'acme', '--host', 'Acme.Localhost', '--json', '--data-dir', parent.dataDir]));
  t.match(created, { organization_id: /^[0-9a-f]{24}$/, name: 'acme', hosts: ['acme.localhost'], platform: false });

  const listed = JSON.parse(await run(['list', '--json', '--data-dir', parent.dataDir]));
  t.same(listed.map((organization: { name: string; platform: boolean }) => [organization.name, organization.platform]), [['platform', true], ['acme', false]], 'the platform first, then the tenant');
  const table = (await run(['list', '--data-dir', parent.dataDir])).trimEnd().split('\n');
  t.match(table[0], /^ORGANIZATION ID +NAME +PLATFORM +HOSTS$/);
  t.match(table[2], new RegExp(`^${created.organization_id} +acme +no +acme\\.localhost$`));

  // The tenant cluster's own store: a new one, whose first organization is the tenant under the same id.
  const tenantDir = path.join(tempDir(), 'acme');
  const printed = output();
  await init(['--org', 'acme', '--id', created.organization_id, '--host', 'acme.localhost', '--json', '--data-dir', tenantDir], printed.stream);
  const tenantKey = JSON.parse(printed.text());
  t.equal(tenantKey.organization_id, created.organization_id, 'the same id in both stores');
  const store = await openStore(configFor(tenantDir));
  t.teardown(() => store.close());
  t.match(await store.collection('organizations').findOne({ _id: created.organization_id }), { name: 'acme', hosts: ['acme.localhost'], platform: true });
  const authorized = await new Authorizer(store).request({ host: 'acme.localhost', headers: { authorization: `Bearer ${tenantKey.key}` } }, { method: 'status' });
  t.match(authorized, { organization_id: created.organization_id, user: { admin: true } });

  // orgs create --id into a store that exists: the same id again.
  const other = await initialized();
  const copied = JSON.parse(await run(['create', 'acme', '--id', created.organization_id, '--host', 'acme.localhost', '--json', '--data-dir', other.dataDir]));
  t.equal(copied.organization_id, created.organization_id);
});

t.test('an organization that exists is refused, naming it, and nothing is written', async (t) => {
  const parent = await initialized();
  const acme = JSON.parse(await run(['create', 'acme', '--host', 'acme.localhost', '--json', '--data-dir', parent.dataDir]));
  await t.rejects(run(['create', 'acme', '--host', 'other.localhost', '--data-dir', parent.dataDir]), {
    exitCode: 1,
    message: new RegExp(`^organization "acme" already exists in .*fleetplane\\.db \\(${acme.organization_id}\\)$`),
  });
  await t.rejects(run(['create', 'beta', '--host', 'beta.localhost', '--host', 'acme.localhost', '--data-dir', parent.dataDir]), {
    exitCode: 1,
    message: new RegExp(`^host acme\\.localhost is already served by organization "acme" \\(${acme.organization_id}\\)`),
  });
  await t.rejects(run(['create', 'gamma', '--id', acme.organization_id, '--host', 'gamma.localhost', '--data-dir', parent.dataDir]), {
    exitCode: 1,
    message: new RegExp(`^organization ${acme.organization_id} \\("acme"\\) already exists`),
  });
  await t.rejects(init(['--org', 'again', '--data-dir', parent.dataDir], output().stream), { exitCode: 1, message: /already initialized; add an organization with "fleetplane orgs create"/ });
  const store = await openStore(configFor(parent.dataDir));
  t.teardown(() => store.close());
  t.same((await store.collection('organizations').find({}, { sort: { _id: 1 } })).map((organization) => organization.name), ['platform', 'acme'], 'no organization was added');
});

t.test('orgs: bad input is one line and exit 2 before the store is opened; no store is exit 1', async (t) => {
  const parent = await initialized();
  const cases: Array<[string[], RegExp]> = [
    [['create', '--host', 'a.localhost'], /^create takes the organization NAME/],
    [['create', 'acme'], /^--host is required/],
    [['create', 'acme', '--host', 'a b'], /^--host must be host names/],
    [['create', 'acme', '--host', 'a.localhost', '--id', 'acme'], /^--id takes an organization id as another store printed it \(24 hex digits\), got "acme"$/],
    [['create', 'acme', 'extra', '--host', 'a.localhost'], /^unexpected argument "extra"/],
    [['list', '--host', 'a.localhost'], /^--host is not used by list/],
    [['remove', 'acme'], /^unknown action "remove" \(create or list\)/],
    [[], /^missing action/],
  ];
  for (const [argv, message] of cases) await t.rejects(run([...argv, '--data-dir', parent.dataDir]), { exitCode: 2, message }, argv.join(' '));
  await t.rejects(init(['--id', 'nope', '--data-dir', tempDir()], output().stream), { exitCode: 2, message: /^--id takes an organization id/ });
  await t.rejects(run(['list', '--data-dir', path.join(tempDir(), 'missing')]), { exitCode: 1, message: /^no store at / });

  const store = await openStore(configFor(parent.dataDir));
  t.teardown(() => store.close());
  t.equal(await store.collection('organizations').countDocuments(), 1, 'nothing was written');

  const cli = await runCli(['orgs', 'create', 'acme', '--hots', 'x', '--data-dir', parent.dataDir]);
  t.equal(cli.code, 2);
  t.equal(cli.stderr.trim().split('\n').length, 1, 'one line');
  t.equal(firstLine(cli.stderr), 'fleetplane: unknown option "--hots" (did you mean "--host"?); see "fleetplane orgs --help"');
  const help = await runCli(['orgs', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /^Usage: fleetplane orgs <create\|list>/);
});
