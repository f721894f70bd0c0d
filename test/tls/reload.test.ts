import t from 'tap';
import https from 'node:https';
import path from 'node:path';
import tls, { type TLSSocket } from 'node:tls';
import { writeFileSync } from 'node:fs';
import { createKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess, fleetplane, freePort, request, tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { Certificates } from './fixtures.js';

t.setTimeout(300_000);

// The files the server is configured with; the test writes new certificates over them.
const certs = new Certificates(tempDir('fleetplane-tls-'));
const files = { key: path.join(certs.dir, 'https.key'), cert: path.join(certs.dir, 'https.crt'), meshKey: path.join(certs.dir, 'mesh.key'), meshCert: path.join(certs.dir, 'mesh.crt'), meshCa: path.join(certs.dir, 'mesh-ca.crt') };
const put = (pair: { key: string; cert: string }, key = files.key, cert = files.cert) => {
  writeFileSync(key, pair.key);
  writeFileSync(cert, pair.cert);
};
const first = certs.selfSigned('first', 'a1');
const second = certs.selfSigned('second', 'b2');
const third = certs.selfSigned('third', 'c3');
const ca = certs.authority('mesh-ca');
const meshFirst = certs.leaf('mesh-first', 'mesh-ca', 'node', 'd4');
const meshSecond = certs.leaf('mesh-second', 'mesh-ca', 'node', 'e5');
put(first);
put(meshFirst, files.meshKey, files.meshCert);
writeFileSync(files.meshCa, ca.cert);

const { dataDir, tenants } = await dataDirWithTenants([
  { name: 'platform', hosts: ['localhost', '127.0.0.1'] },
  { name: 'tenant', hosts: ['tenant.test'] },
]);
const [platform, tenant] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
const reloader = await createKey(store, { organizationId: platform.organization_id, name: 'reloader', permissions: { 'tls.reload': true } });
const statusOnly = await createKey(store, { organizationId: platform.organization_id, name: 'status', permissions: { status: true } });
const tenantEverything = await createKey(store, { organizationId: tenant.organization_id, name: 'everything', permissions: { '*': true } });
await store.close();

const meshPort = await freePort();
const server = await ServerProcess.start({
  workers: { count: 2, readyTimeoutMs: 120_000 },
  dataDir,
  https: { port: 0, key: files.key, cert: files.cert },
  mesh: { port: meshPort, host: '127.0.0.1', tls: { key: files.meshKey, cert: files.meshCert, ca: files.meshCa } },
});
t.teardown(() => server.stop());
await server.readyWorkers(2, 0, 120_000);
const httpsPort = server.events.find((event) => event.event === 'started')!.httpsPort as number;

/** The serial of the certificate a new HTTPS connection is shown, and who served it. */
function serialOnNewConnection(): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: httpsPort, path: '/whoami', rejectUnauthorized: false, agent: false }, (res) => {
      const serial = (res.socket as TLSSocket).getPeerCertificate().serialNumber;
      res.resume();
      res.on('end', () => resolve(serial));
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** The serial the mesh port shows a peer presenting a certificate of the mesh's CA. */
function meshSerial(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: meshPort, key: meshFirst.key, cert: meshFirst.cert, ca: ca.cert, servername: 'localhost' }, () => {
      resolve(socket.getPeerCertificate().serialNumber);
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const refusedLines = () => server.events.filter((event) => event.msg === 'TLS reload refused: the certificates in use are kept');

// One keep-alive connection, opened on the first certificate and used across every reload.
const keepAlive = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
t.teardown(() => keepAlive.destroy());
function onKeptConnection(): Promise<{ status: number; serial: string; localPort: number }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: httpsPort, path: '/whoami', agent: keepAlive }, (res) => {
      const socket = res.socket as TLSSocket;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, serial: socket.getPeerCertificate().serialNumber, localPort: socket.localPort! }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('a change of the PEM files swaps the certificate of every worker; an open keep-alive connection keeps working', async (t) => {
  t.equal(await serialOnNewConnection(), 'A1');
  const kept = await onKeptConnection();
  t.equal(kept.serial, 'A1');
  put(second);
  // Each new connection may reach either worker: every one of several in a row must show the new serial.
  await until('the new certificate on new connections', async () => (await Promise.all([1, 2, 3, 4].map(serialOnNewConnection))).every((serial) => serial === 'B2'));
  t.pass('new connections, to both workers, see the new certificate');
  const again = await onKeptConnection();
  t.same({ status: again.status, localPort: again.localPort }, { status: 200, localPort: kept.localPort }, 'the open connection is the same one and still served');
  t.equal(again.serial, 'A1', 'with the session it opened with');
});

t.test('a broken pair is refused: one log line, the old certificate kept, and ctl exits 1 with the reason', async (t) => {
  const before = refusedLines().length;
  // Another key with the certificate in use: a key that is not the certificate's.
  put({ key: third.key, cert: second.cert });
  await until('the refusal to be logged', async () => refusedLines().length > before);
  t.match(refusedLines().at(-1), { trigger: 'files', reason: 'https.key is not the key of https.cert' });
  t.equal(await serialOnNewConnection(), 'B2', 'the certificate in use is kept');
  const mismatch = await fleetplane(['ctl', 'tls', 'reload', '--data-dir', dataDir]);
  t.equal(mismatch.status, 1, 'ctl exits 1');
  t.match(mismatch.stdout, /error bad_request: https\.key is not the key of https\.cert: the certificates in use are kept/);
  writeFileSync(files.cert, 'not a certificate\n');
  const garbage = await fleetplane(['ctl', 'tls', 'reload', '--data-dir', dataDir]);
  t.equal(garbage.status, 1);
  t.match(garbage.stdout, /https\.cert does not parse as a PEM certificate/);
  t.equal(await serialOnNewConnection(), 'B2', 'still the certificate in use');
  t.equal((await onKeptConnection()).status, 200, 'and the open connection still works');
  const lines = refusedLines().slice(before);
  t.equal(lines.filter((line) => line.trigger === 'request').length, 2, 'one line per refused request');
});

t.test('ctl tls reload swaps the HTTPS certificate in every worker and the mesh mutual-TLS material', async (t) => {
  t.equal(await meshSerial(), 'D4');
  put(third);
  put(meshSecond, files.meshKey, files.meshCert);
  const reloaded = await fleetplane(['ctl', 'tls', 'reload', '--json', '--data-dir', dataDir]);
  t.equal(reloaded.status, 0, reloaded.stderr);
  const reply = JSON.parse(reloaded.stdout).replies[0];
  t.match(reply, { worker: 0, ok: true, result: { https: { serial: 'C3', workers: 2 }, mesh: { serial: 'E5' } } }, 'the reply names the new certificates and the workers that took it');
  t.same(await Promise.all([1, 2, 3, 4].map(serialOnNewConnection)), ['C3', 'C3', 'C3', 'C3'], 'new connections see it at once');
  t.equal(await meshSerial(), 'E5', 'the mesh port presents the new certificate');
  t.equal((await onKeptConnection()).status, 200, 'the open connection still works');
});

t.test('POST /control tls.reload: a platform key with the right; refused for tenant keys, a key without the right and no key', async (t) => {
  const control = (key?: string, host = '127.0.0.1') => request(server.port, '/control', { body: { method: 'tls.reload', master: true }, key, host });
  const allowed = await control(reloader.key);
  t.equal(allowed.status, 200);
  t.match(allowed.json().replies[0], { ok: true, result: { https: { serial: 'C3' } } });
  t.equal((await control(platform.adminKey)).status, 200, 'the platform admin');
  for (const [who, key, host] of [
    ['a tenant admin', tenant.adminKey, 'tenant.test'],
    ['a tenant key granted everything', tenantEverything.key, 'tenant.test'],
    ['a platform key without tls.reload', statusOnly.key, '127.0.0.1'],
    ['no key', undefined, '127.0.0.1'],
  ] as const) {
    const refused = await control(key, host);
    t.equal(refused.status, 403, `${who}: 403`);
  }
  const scoped = await request(server.port, '/control', { body: { method: 'tls.reload', organization_id: tenant.organization_id }, key: tenant.adminKey, host: 'tenant.test' });
  t.equal(scoped.status, 403, "a tenant admin's organization-scoped envelope is refused too");
});

t.test('tls.revoke on a mesh whose certificates are files: refused with the reason', async (t) => {
  const answer = await request(server.port, '/control', { body: { method: 'tls.revoke', master: true, data: 'AB12' }, key: platform.adminKey });
  t.match(answer.json().replies[0], { ok: false, error: { code: 'bad_request', message: /mesh\.tls\.mode "auto" only/ } });
});
