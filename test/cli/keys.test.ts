import t from 'tap';
import path from 'node:path';
import { existsSync } from 'node:fs';
import { loadConfig } from '../../src/config/load.js';
import { openStore } from '../../src/db/open.js';
import { keys as keysCommand } from '../../cli/keys.js';
import { Authorizer } from '../../src/auth/authorize.js';
import { hashSecret } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { output, runCli, tempDir } from './fixtures/cli.js';
import { scaled } from '../helpers/wait.js';

// A CLI process compiles the sources on start, which takes seconds on a busy machine.
t.setTimeout(scaled(300_000));

const dataDir = tempDir();
const initialized = output();
await (await import('../../cli/init.js')).init(['--json', '--host', 'acme.example', '--data-dir', dataDir], initialized.stream);
const admin = JSON.parse(initialized.text()) as { organization_id: string; key_id: string; key: string };
// A second connection to the file: what a running worker holds while the CLI changes keys.
const worker = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
t.teardown(() => worker.close());
const countKeys = () => worker.collection('keys').countDocuments();
const asWorker = (key: string, method: string) => new Authorizer(worker).request({ host: 'acme.example', headers: { authorization: `Bearer ${key}` } }, { method });
/** Runs `fleetplane keys ...` in this process; resolves to what it printed. */
async function keys(...args: string[]): Promise<string> {
  const printed = output();
  await keysCommand([...args, '--data-dir', dataDir], printed.stream);
  return printed.text();
}

t.test('fleetplane keys create --json prints one JSON object with a key limited to its permissions', async (t) => {
  const result = await runCli(['keys', 'create', '--name', 'prometheus', '--permissions', '{"metrics.read":true}', '--json', '--data-dir', dataDir]);
  t.equal(result.code, 0, result.stderr);
  t.equal(result.stdout.trim().split('\n').length, 1, 'one line');
  const created = JSON.parse(result.stdout);
  t.match(created, { organization_id: admin.organization_id, key_id: /^fpk_/, key: /^fpk_.+\..+$/ });
  t.match(await asWorker(created.key, 'metrics.read'), { user: { name: 'prometheus', admin: false } });
  await t.rejects(asWorker(created.key, 'shutdown'), { code: 'permission_denied' });
});

t.test('fleetplane keys create with invalid permissions JSON fails in one line with exit 2 and writes nothing', async (t) => {
  const before = await countKeys();
  const result = await runCli(['keys', 'create', '--name', 'broken', '--permissions', '{"metrics.read":', '--data-dir', dataDir]);
  t.equal(result.code, 2);
  t.equal(result.stderr.trim().split('\n').length, 1, 'one line');
  t.match(result.stderr, /^fleetplane: --permissions is not valid JSON/);
  for (const permissions of ['{"status":"yes"}', '["metrics.read"]', '{"bad method":true}']) {
    await t.rejects(keys('create', '--name', 'broken', '--permissions', permissions), { exitCode: 2, message: /^--permissions: / }, permissions);
  }
  t.equal(await countKeys(), before, 'no key was written');
});

t.test('keys create refuses other bad input with exit 2 and writes nothing', async (t) => {
  const before = await countKeys();
  await t.rejects(keys('create'), { exitCode: 2, message: /--name is required/ });
  await t.rejects(keys('create', '--name', 'x', '--expires', 'soon'), { exitCode: 2, message: /expiresAt: not an ISO 8601 time/ });
  await t.rejects(keys('create', '--name', 'x', '--expires', '2001-01-01T00:00:00Z'), { exitCode: 2, message: /in the past/ });
  await t.rejects(keys('create', '--name', 'x', '--host', 'bad host'), { exitCode: 2, message: /hosts/ });
  await t.rejects(keys('create', '--name', 'x', '--org', 'no-such-org'), { exitCode: 2, message: /no organization no-such-org/ });
  await t.rejects(keys('create', '--name', 'x', '--nme', 'y'), { exitCode: 2, message: /^unknown option "--nme" \(did you mean "--name"\?\); see "fleetplane keys --help"$/ });
  await t.rejects(keys('frobnicate'), { exitCode: 2, message: /unknown action "frobnicate"/ });
  await t.rejects(keys(), { exitCode: 2, message: /missing action/ });
  t.equal(await countKeys(), before);
});

t.test('keys list shows ids and names, never secrets or hashes', async (t) => {
  const created = JSON.parse(await keys('create', '--name', 'listed', '--host', 'acme.example', '--expires', '2099-01-01T00:00:00Z', '--json'));
  const secret = created.key.split('.')[1];
  const text = await keys('list');
  const lines = text.trimEnd().split('\n');
  t.match(lines[0], /^KEY ID +NAME +ADMIN +STATE +HOSTS +EXPIRES$/, 'a header');
  t.match(text, new RegExp(`${admin.key_id} +admin +yes +active +any +never`));
  t.match(text, new RegExp(`${created.key_id} +listed +no +active +acme\\.example +2099-01-01T00:00:00\\.000Z`));
  for (const column of ['NAME', 'ADMIN', 'STATE']) {
    const at = lines[0]!.indexOf(column);
    t.ok(lines.slice(1).every((line) => line[at - 1] === ' ' && line[at] !== ' '), `the ${column} column is aligned`);
  }
  const listed = JSON.parse(await keys('list', '--json'));
  t.equal(listed.organization_id, admin.organization_id);
  t.match(listed.keys.find((key: { key_id: string }) => key.key_id === created.key_id), { name: 'listed', hosts: ['acme.example'], admin: false, disabled: false });
  for (const printed of [text, JSON.stringify(listed)]) {
    t.notOk(printed.includes(secret) || printed.includes(admin.key.split('.')[1]!), 'no secret');
    t.notOk(printed.includes(hashSecret(secret)) || printed.includes('secretHash'), 'no hash');
  }
});

t.test('fleetplane keys revoke in another process stops the key in a running worker after its revalidation interval', async (t) => {
  const created = JSON.parse(await keys('create', '--name', 'doomed', '--admin', '--json'));
  let now = Date.now();
  const authorizer = new Authorizer(worker, { revalidateMs: 250, now: () => now });
  const call = () => authorizer.request({ host: 'acme.example', headers: { authorization: `Bearer ${created.key}` } }, { method: 'status' });
  await call();
  const revoked = await runCli(['keys', 'revoke', created.key_id, '--data-dir', dataDir]);
  t.equal(revoked.code, 0, revoked.stderr);
  t.match(revoked.stdout, `revoked ${created.key_id}`);
  now += 250;
  await t.rejects(call(), { code: 'key_revoked' });
  t.match(await keys('list'), new RegExp(`${created.key_id} +doomed +yes +revoked`));
  await t.rejects(keys('revoke', 'fpk_AAAAAAAAAAAAAAAA'), { exitCode: 2, message: /no key fpk_AAAAAAAAAAAAAAAA/ });
  await t.rejects(keys('revoke', 'nonsense'), { exitCode: 2, message: /not a key id/ });
  await t.rejects(keys('revoke'), { exitCode: 2, message: /exactly one KEY_ID/ });
});

t.test('keys on a data directory without a store, or on a store that was never initialized, says to run init', async (t) => {
  const empty = tempDir();
  await t.rejects(keysCommand(['create', '--name', 'x', '--data-dir', empty], output().stream), { exitCode: 1, message: /^no store at .*: .*run "fleetplane init"/ });
  t.notOk(existsSync(path.join(empty, 'fleetplane.db')), 'no store was created');
  await (await openStore(loadConfig({ env: {}, object: { dataDir: empty } }).config)).close();
  await t.rejects(keysCommand(['create', '--name', 'x', '--data-dir', empty], output().stream), { exitCode: 1, message: /run "fleetplane init" first/ });
});
