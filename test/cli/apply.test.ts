import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { apply as applyCommand } from '../../cli/apply.js';
import { init } from '../../cli/init.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { SecretKeyring } from '../../src/secrets/keyring.js';
import { output, runCli, tempDir } from './fixtures/cli.js';
import { scaled } from '../helpers/wait.js';

// A CLI process compiles the sources on start, which takes seconds on a busy machine.
t.setTimeout(scaled(300_000));

/** The example resource file of SPEC 11.3, as written there. */
const SPEC_EXAMPLE = {
  apis: [{ name: 'items', baseUrl: 'http://127.0.0.1:9000', timeoutMs: 5000, endpoints: { create: { method: 'post', path: '/items/{id}' } } }],
  workflows: [
    {
      name: 'make-item',
      steps: [{ name: 'create', api: 'items', endpoint: 'create', method: 'post', data: { id: '${input.id}', title: 'Item ${input.title}' } }],
      output: { created: '${steps.create}' },
    },
  ],
  webhooks: [
    {
      name: 'github',
      verify: { scheme: 'hmac-sha256', header: 'x-hub-signature-256', prefix: 'sha256=', secret: 'change-me' },
      event: { header: 'x-github-event' },
      workflows: { push: 'make-item' },
    },
  ],
};

const dataDir = tempDir();
const initialized = output();
await init(['--json', '--host', 'acme.example', '--data-dir', dataDir], initialized.stream);
const admin = JSON.parse(initialized.text()) as { organization_id: string };
const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
t.teardown(() => store.close());
const scope = store.forOrganization(admin.organization_id);
const count = async () => {
  let total = await store.collection('organizations').countDocuments();
  for (const kind of ['apis', 'workflows', 'webhooks', 'servers_config']) total += await scope.collection(kind).countDocuments();
  return total;
};

function resourceFile(content: unknown): string {
  const file = path.join(tempDir(), 'resources.json');
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}
async function apply(...args: string[]): Promise<string> {
  const printed = output();
  await applyCommand([...args, '--data-dir', dataDir], printed.stream);
  return printed.text();
}

t.test('examples/resources.json (the file the README applies) is this example; --dry-run prints the plan and writes nothing', async (t) => {
  const example = path.resolve(import.meta.dirname, '..', '..', 'examples', 'resources.json');
  t.same(JSON.parse(readFileSync(example, 'utf8')), SPEC_EXAMPLE);
  const before = await count();
  const printed = await apply('-f', example, '--dry-run');
  t.equal(printed, [`organization ${admin.organization_id} (dry run: nothing written)`, '  created   apis/items', '  created   workflows/make-item', '  created   webhooks/github', '3 resources: 3 created, 0 changed, 0 unchanged would be written', ''].join('\n'));
  t.equal(await count(), before, 'nothing was written');
  t.same(JSON.parse(await apply('-f', example, '--dry-run', '--json')).dryRun, true);
});

t.test('the SPEC 11.3 example applies: everything created in the first organization, secrets not printed', async (t) => {
  const printed = await apply('-f', resourceFile(SPEC_EXAMPLE));
  t.equal(printed, [`organization ${admin.organization_id}`, '  created   apis/items', '  created   workflows/make-item', '  created   webhooks/github', '3 resources: 3 created, 0 changed, 0 unchanged', ''].join('\n'));
  t.notMatch(printed, /change-me/);
  const stored = (await scope.collection('webhooks').findOne({ name: 'github' }))!;
  const secret = (stored.verify as { secret: string }).secret;
  t.match(secret, /^fpsec:v1:/, 'the secret is stored sealed');
  const keyring = SecretKeyring.fromEnvironment(path.join(dataDir, 'secrets.key'), {});
  t.equal(keyring.open(secret, { organizationId: admin.organization_id, collection: 'webhooks', path: ['verify', 'secret'] }), 'change-me', 'and opens for verification');
  t.equal((await scope.collection('workflows').findOne({ name: 'make-item' }))?.organization_id, admin.organization_id);
});

t.test('applying again changes nothing; a changed resource lists the changed fields', async (t) => {
  const again = await apply('-f', resourceFile(SPEC_EXAMPLE));
  t.match(again, /3 resources: 0 created, 0 changed, 3 unchanged/);
  const changed = structuredClone(SPEC_EXAMPLE);
  changed.apis[0]!.timeoutMs = 1000;
  changed.webhooks[0]!.verify.secret = 'rotated-secret';
  delete (changed.workflows[0] as { output?: unknown }).output;
  const printed = await apply('-f', resourceFile(changed), '--json');
  const result = JSON.parse(printed);
  t.same(result.resources, [
    { kind: 'apis', name: 'items', outcome: 'changed', fields: ['timeoutMs'] },
    { kind: 'workflows', name: 'make-item', outcome: 'changed', fields: ['output'] },
    { kind: 'webhooks', name: 'github', outcome: 'changed', fields: ['verify'] },
  ]);
  t.notMatch(printed, /rotated-secret|change-me/, 'the diff names fields, never secret values');
  t.equal((await scope.collection('workflows').findOne({ name: 'make-item' }))?.output, undefined, 'a field left out is removed');
  t.equal((await scope.collection('apis').findOne({ name: 'items' }))?.timeoutMs, 1000);
});

t.test('organizations and servers_config are upserted by name', async (t) => {
  const file = resourceFile({ organizations: [{ name: 'globex', hosts: ['Globex.Example'] }], servers_config: [{ name: 'routing', type: 'routing', provider: 'dns' }] });
  t.match(await apply('-f', file), /created   organizations\/globex[\s\S]*created   servers_config\/routing/);
  t.same((await store.collection('organizations').findOne({ name: 'globex' }))?.hosts, ['globex.example'], 'hosts normalized');
  t.match(await apply('-f', resourceFile({ organizations: [{ name: 'globex', hosts: ['globex.example', 'www.globex.example'] }] })), /changed   organizations\/globex \(hosts\)/);
  await t.rejects(apply('-f', resourceFile({ organizations: [{ name: 'thief', hosts: ['acme.example'] }] })), { exitCode: 2, message: /organizations\.0\.hosts: acme\.example is served by another organization/ });
});

t.test("an organization's CORS origins are set, changed and removed by apply", async (t) => {
  const organizations = store.collection('organizations');
  const initech = (cors?: unknown) => resourceFile({ organizations: [{ name: 'initech', hosts: ['initech.example'], ...(cors ? { cors } : {}) }] });
  t.match(await apply('-f', initech({ origins: ['https://a.example'] })), /created   organizations\/initech/);
  t.same((await organizations.findOne({ name: 'initech' }))?.cors, { origins: ['https://a.example'] }, 'created with its origins');
  t.match(await apply('-f', initech({ origins: ['https://a.example'] })), /unchanged organizations\/initech/);
  t.match(await apply('-f', initech({ origins: ['https://a.example', 'http://localhost:3000'] })), /changed   organizations\/initech \(cors\)/);
  t.same((await organizations.findOne({ name: 'initech' }))?.cors, { origins: ['https://a.example', 'http://localhost:3000'] });
  t.match(await apply('-f', initech()), /changed   organizations\/initech \(cors\)/);
  const dropped = await organizations.findOne({ name: 'initech' });
  t.notOk(dropped && Object.hasOwn(dropped, 'cors'), 'a file that drops cors removes it');
  t.same(dropped?.hosts, ['initech.example'], 'the rest stays');
  t.match(await apply('-f', initech()), /unchanged organizations\/initech/);
});

t.test('--org picks the organization; an unknown one is refused', async (t) => {
  const globex = await store.collection('organizations').findOne({ name: 'globex' });
  t.match(await apply('-f', resourceFile({ apis: SPEC_EXAMPLE.apis }), '--org', globex!._id), new RegExp(`organization ${globex!._id}\\n  created   apis/items`));
  await t.rejects(apply('-f', resourceFile({ apis: SPEC_EXAMPLE.apis }), '--org', 'no-such-org'), { exitCode: 2, message: 'no organization no-such-org' });
});

t.test('malformed resource files: one line naming the problem, exit 2, nothing written', async (t) => {
  const before = await count();
  const step = SPEC_EXAMPLE.workflows[0]!.steps[0]!;
  const cases: Array<[unknown, RegExp]> = [
    ['{"apis": [', /is not valid JSON/],
    ['{"__proto__": {"apis": []}}', /is not valid JSON: "__proto__" keys are not allowed/],
    [[], /value: expected object/],
    [{ apis: [{ ...SPEC_EXAMPLE.apis[0], name: 'fresh' }], wrkflows: [] }, /: wrkflows: unknown field/],
    [{ apis: [{ name: 'a', baseUrl: 'http://u:p@x', endpoints: { e: { method: 'get', path: '/' } } }] }, /apis\.0\.baseUrl: must not carry credentials/],
    [{ apis: [SPEC_EXAMPLE.apis[0], SPEC_EXAMPLE.apis[0]] }, /apis\.1\.name: "items" appears twice/],
    // The check CRUD writes get: the one the runtime compiles a provider with.
    [{ apis: [{ ...SPEC_EXAMPLE.apis[0], baseUrl: 'file:///etc/passwd' }] }, /apis\.0\.baseUrl: must be an http or https URL$/],
    [{ apis: [{ ...SPEC_EXAMPLE.apis[0], junk: 1 }] }, /apis\.0\.junk: unknown field$/],
    [{ apis: [{ ...SPEC_EXAMPLE.apis[0], name: 'fresh' }], workflows: [{ name: 'w', steps: [{ ...step, data: '${steps.later}' }] }] }, /workflows\.0\.steps\.0: \$\{steps\.later\} is not an earlier step/],
    [{ workflows: [{ name: 'w', steps: [], output: { $bad: 1 } }] }, /workflows\.0: document holds an invalid field name "\$bad"/],
    [{ webhooks: [{ ...SPEC_EXAMPLE.webhooks[0], verify: { scheme: 'hmac-sha256', header: 'x', secret: '' } }] }, /webhooks\.0\.verify\.secret/],
    [{ webhooks: [{ ...SPEC_EXAMPLE.webhooks[0], verify: { scheme: 'md5', header: 'x', secret: 's' } }] }, /webhooks\.0\.verify\.scheme/],
    [{ apis: [{ ...SPEC_EXAMPLE.apis[0], _id: 'x' }] }, /apis\.0\._id: set by the store/],
    [{ organizations: [{ name: 'o', hosts: ['not a host'] }] }, /organizations\.0\.hosts: not host names/],
    [{ organizations: [{ name: 'o', hosts: ['o.example'], cors: { origins: ['https://o.example/app'] } }] }, /organizations\.0\.cors\.origins\.0/],
    [{ organizations: [{ name: 'o', hosts: ['o.example'], cors: { origins: ['o.example'] } }] }, /organizations\.0\.cors\.origins\.0/],
    [{ organizations: [{ name: 'o', hosts: ['o.example'], cors: { origin: ['https://o.example'] } }] }, /organizations\.0\.cors/],
  ];
  for (const [content, message] of cases) await t.rejects(apply('-f', resourceFile(content)), { exitCode: 2, message }, JSON.stringify(content).slice(0, 80));
  await t.rejects(apply(), { exitCode: 2, message: /missing -f FILE/ });
  await t.rejects(apply('-f', path.join(tempDir(), 'absent.json')), { exitCode: 2, message: /cannot read .*ENOENT/ });
  t.equal(await count(), before, 'nothing was written');

  const cli = await runCli(['apply', '-f', resourceFile({ apis: [{ name: 'x' }] }), '--data-dir', dataDir]);
  t.equal(cli.code, 2);
  t.equal(cli.stderr.trim().split('\n').length, 1, 'one line');
  t.match(cli.stderr, /^fleetplane: .*apis\.0\.baseUrl: is required/);

  const origin = await runCli(['apply', '-f', resourceFile({ organizations: [{ name: 'o', hosts: ['o.example'], cors: { origins: ['https://o.example/'] } }] }), '--data-dir', dataDir]);
  t.equal(origin.code, 2, 'an invalid origin exits 2');
  t.equal(origin.stderr.trim().split('\n').length, 1, 'one line');
  t.match(origin.stderr, /^fleetplane: .*organizations\.0\.cors\.origins\.0/);
  t.equal(await count(), before, 'nothing was written');
});
