import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildApp } from '../../app.js';
import { standInServer } from '../helpers/route-context.js';
import { Authorizer } from '../../src/auth/authorize.js';
import { loadConfig } from '../../src/config/load.js';
import type { FleetplaneConfig } from '../../src/config/schema.js';
import { organization, tempDir, testStore } from '../auth/fixtures/tenants.js';

const SECRET = 'outside-the-root-secret';

/** A static root (`public/`) next to files it must never expose, and symlinks in and out of it. */
function staticTree(): string {
  const base = tempDir();
  const root = path.join(base, 'public');
  mkdirSync(path.join(root, 'sub'), { recursive: true });
  mkdirSync(path.join(base, 'outside'));
  writeFileSync(path.join(root, 'app.js'), 'console.log("app");\n');
  writeFileSync(path.join(root, 'sub', 'page.txt'), 'page\n');
  writeFileSync(path.join(root, '.env'), `TOKEN=${SECRET}\n`);
  writeFileSync(path.join(base, 'secret.txt'), `${SECRET}\n`);
  writeFileSync(path.join(base, 'outside', 'file.txt'), `${SECRET}\n`);
  symlinkSync(path.join(base, 'secret.txt'), path.join(root, 'link.txt'));
  symlinkSync(path.join(base, 'outside'), path.join(root, 'outdir'));
  symlinkSync(path.join(root, 'app.js'), path.join(root, 'alias.js'));
  return root;
}

/** The real app over a stand-in server whose organization `acme` (host `acme.test`) may be shed. */
async function staticApp(t: Test, config: FleetplaneConfig, shed = false) {
  const store = await testStore();
  const acme = await organization(store, { name: 'acme', hosts: ['acme.test'] });
  const shedding = new Set(shed ? [acme._id] : []);
  const server = standInServer(loadConfig({ env: {}, object: { dataDir: tempDir(), ...config } }).config, {
    state: { shedding, isShed: (id: string | undefined) => id !== undefined && shedding.has(id) },
    db: store,
    authorize: new Authorizer(store),
  });
  const { app } = await buildApp({ server, logger: false });
  t.teardown(async () => {
    await app.close();
    await store.close();
  });
  return app;
}

t.test('files under the root are served at the prefix; symlinks inside the root work', async (t) => {
  const app = await staticApp(t, { http: { static: { root: staticTree() } } });
  const file = await app.inject({ method: 'GET', url: '/static/app.js', headers: { host: 'acme.test' } });
  t.equal(file.statusCode, 200);
  t.equal(file.body, 'console.log("app");\n');
  t.match(file.headers['content-type'], /javascript/);
  t.equal((await app.inject({ method: 'GET', url: '/static/sub/page.txt' })).body, 'page\n');
  t.equal((await app.inject({ method: 'GET', url: '/static/alias.js' })).statusCode, 200, 'a symlink to a file inside the root');
  t.equal((await app.inject({ method: 'HEAD', url: '/static/app.js' })).statusCode, 200);
});

t.test('traversal, encoded traversal, symlinks out of the root and dotfiles are 404, and nothing outside is read', async (t) => {
  const app = await staticApp(t, { http: { static: { root: staticTree() } } });
  const attempts = [
    '/static/../secret.txt',
    '/static/sub/../../secret.txt',
    '/static/%2e%2e/secret.txt',
    '/static/%2E%2E/secret.txt',
    '/static/%2e%2e%2fsecret.txt',
    '/static/sub%2f..%2f..%2fsecret.txt',
    '/static/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd',
    '/static/%252e%252e/secret.txt',
    '/static/..%5csecret.txt',
    '/static/app.js%00.txt',
    '/static/link.txt',
    '/static/outdir/file.txt',
    '/static/outdir',
    '/static/.env',
    '/static/missing.js',
  ];
  for (const url of attempts) {
    const answer = await app.inject({ method: 'GET', url, headers: { host: 'acme.test' } });
    t.equal(answer.statusCode, 404, url);
    t.match(answer.json(), { error: { code: String, message: String } }, `${url}: the error shape`);
    t.notOk(answer.body.includes(SECRET), `${url}: nothing from outside the root`);
  }
});

t.test('static files are off by default', async (t) => {
  const app = await staticApp(t, {});
  t.equal((await app.inject({ method: 'GET', url: '/static/app.js' })).statusCode, 404);
});

t.test('at prefix /, files are served beside the built-in routes, which keep their paths', async (t) => {
  const app = await staticApp(t, { http: { static: { root: staticTree(), prefix: '/' } } });
  t.equal((await app.inject({ method: 'GET', url: '/app.js' })).statusCode, 200);
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).json().status, 'ready');
  t.equal((await app.inject({ method: 'GET', url: '/%2e%2e/secret.txt' })).statusCode, 404);
});

t.test("a shed organization's static requests get the fallback like every other request", async (t) => {
  const app = await staticApp(t, { http: { static: { root: staticTree() } }, fallback: { retryAfterS: 7 } }, true);
  const answer = await app.inject({ method: 'GET', url: '/static/app.js', headers: { host: 'acme.test' } });
  t.equal(answer.statusCode, 503);
  t.equal(answer.headers['retry-after'], '7');
  t.equal((await app.inject({ method: 'GET', url: '/static/app.js', headers: { host: 'other.test' } })).statusCode, 200, 'another host is served');
});

t.test('a static root that does not exist fails the boot, naming the field', async (t) => {
  await t.rejects(staticApp(t, { http: { static: { root: path.join(tempDir(), 'nowhere') } } }), /http\.static\.root/);
});
