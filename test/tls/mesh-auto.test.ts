import t from 'tap';
import path from 'node:path';
import WebSocket, { type ClientOptions } from 'ws';
import { dialHeaders } from '../../src/mesh/handshake.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { SecretKeyring } from '../../src/secrets/keyring.js';
import { MESH_AUTHORITIES, MeshAuthority } from '../../src/tls/mesh-authority.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { tempDir } from '../helpers/server-process.js';
import { meshConfig, meshIds, startMeshServer, waitForPeers, type Result } from '../mesh/helpers.js';

t.setTimeout(300_000);

// Three servers on one store, no mesh secret, no certificate files: mutual TLS from the cluster's own CA. The
// certificates live 20 s, so each server renews its own about 13 s after it started.
const LIFETIME_MS = 20_000;
const { dbPath, ids } = meshIds('a', 'b', 'c');
const [A, B, C] = ids as [string, string, string];
const config = (id: string) => meshConfig(id, dbPath, { workers: 1, log: { level: 'info' }, mesh: { secret: undefined, tls: { mode: 'auto', lifetimeMs: LIFETIME_MS } } });
// Started at the same time: each finds no CA and makes one; the store keeps one.
const servers: ServerProcess[] = await Promise.all(ids.map((id) => startMeshServer(config(id))));
t.teardown(() => Promise.all(servers.map((server) => server.stop())));
const [a, b, c] = servers as [ServerProcess, ServerProcess, ServerProcess];
await Promise.all(servers.map((server) => server.readyWorkers(1, 0, 120_000)));

const store = await EmbeddedStore.open(dbPath);
t.teardown(() => store.close());
// The keyring the servers share: the key file beside the store they share.
const keyring = SecretKeyring.fromEnvironment(path.join(path.dirname(dbPath), 'secrets.key'), {});
const clusterCa = await MeshAuthority.open({ store, secrets: keyring, cluster: 'mesh-test' });
// The certificates name servers, not hosts: the server's own check (its id against the link's claim) replaces the host check.
const anyHost = (() => undefined) as unknown as ClientOptions['checkServerIdentity'];
const meshUrlOf = (server: ServerProcess) => server.events.find((event) => event.event === 'started')!.meshUrl as string;

/** Dials A's mesh port as server `name` with `material`: whether the link opened, or the status it was refused with. */
function dialA(name: string, material: { key?: string; cert?: string; ca: string }): Promise<{ opened: boolean; status?: number; error?: string }> {
  const { headers } = dialHeaders({ server: name, cluster: 'mesh-test', to: A }, undefined);
  return new Promise((resolve) => {
    const ws = new WebSocket(meshUrlOf(a), { headers, perMessageDeflate: false, key: material.key, cert: material.cert, ca: material.ca, checkServerIdentity: anyHost });
    ws.on('open', () => {
      ws.close();
      resolve({ opened: true });
    });
    ws.on('error', (error) => {
      const status = /Unexpected server response: (\d+)/.exec(error.message)?.[1];
      resolve({ opened: false, ...(status ? { status: Number(status) } : { error: error.message }) });
    });
  });
}

t.test('three servers form a mutual-TLS mesh with no operator-made certificate, under one cluster CA', async (t) => {
  await Promise.all([waitForPeers(a, [B, C], 60_000), waitForPeers(b, [A, C], 60_000), waitForPeers(c, [A, B], 60_000)]);
  t.match(meshUrlOf(a), /^wss:\/\//, 'the mesh port speaks TLS');
  t.equal(await store.collection(MESH_AUTHORITIES).countDocuments({}), 1, 'concurrent first starts made one CA');
  const record = (await store.collection(MESH_AUTHORITIES).findOne({ _id: 'mesh-test' })) as { key: string } | null;
  t.match(record?.key, /^fpsec:v1:/, "the CA's key is sealed with the keyring");
  for (const server of servers) t.ok(server.events.some((event) => event.msg === 'mesh certificate issued by the cluster CA'), 'each server was issued a certificate');
});

t.test('each renewal under traffic keeps every link', async (t) => {
  const opened = servers.map((server) => server.count((event) => event.event === 'mesh:link:open'));
  let running = true;
  let sent = 0;
  const failures: string[] = [];
  const traffic = servers.map(async (from, index) => {
    while (running) {
      const to = ids[(index + 1 + (sent % 2)) % 3]!;
      try {
        await from.command('mesh.send', { message: { method: 'mesh.echo', server: to, data: sent } }, 10_000);
      } catch (error) {
        failures.push(`${ids[index]} → ${to}: ${(error as Error).message}`);
      }
      sent++;
    }
  });
  await Promise.all(servers.map((server) => server.waitFor((event) => event.msg === 'mesh certificate renewed', 60_000)));
  // And a little traffic after the last renewal.
  const after = sent + 30;
  while (sent < after && failures.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  running = false;
  await Promise.all(traffic);
  t.same(failures, [], `no mesh call failed (${sent} sent)`);
  t.same(servers.map((server) => server.count((event) => event.event === 'mesh:link:close')), [0, 0, 0], 'no link closed');
  t.same(servers.map((server) => server.count((event) => event.event === 'mesh:link:open')), opened, 'and none had to be opened again');
  const renewed = a.events.find((event) => event.msg === 'mesh certificate renewed')!;
  const probe = await clusterCa.issue({ name: `zz-${A}`, lifetimeMs: 60_000 });
  const presented = await new Promise<string>((resolve, reject) => {
    const ws = new WebSocket(meshUrlOf(a), { perMessageDeflate: false, key: probe.material.key, cert: probe.material.cert, ca: probe.material.ca, checkServerIdentity: anyHost });
    ws.on('upgrade', () => undefined);
    ws.on('error', () => undefined);
    ws.on('unexpected-response', (request) => {
      resolve(((request.socket as import('node:tls').TLSSocket).getPeerCertificate().serialNumber));
      ws.terminate();
    });
    setTimeout(() => reject(new Error('no answer from the mesh port')), 10_000).unref();
  });
  t.equal(presented, renewed.serial, 'new handshakes see the renewed certificate');
});

t.test('a certificate of another CA, an expired one and a revoked one are refused', async (t) => {
  const name = `zz-${A}`;
  const valid = await clusterCa.issue({ name, lifetimeMs: 60_000 });
  t.same(await dialA(name, valid.material), { opened: true }, 'a certificate of the cluster CA naming the dialer opens a link');
  t.equal((await dialA(name, { ca: valid.material.ca })).opened, false, 'no client certificate: refused');
  const otherStore = await EmbeddedStore.open(path.join(tempDir('fleetplane-other-ca-'), 'other.db'));
  t.teardown(() => otherStore.close());
  const otherCa = await MeshAuthority.open({ store: otherStore, secrets: keyring, cluster: 'mesh-test' });
  const foreign = await otherCa.issue({ name, lifetimeMs: 60_000 });
  const from = a.events.length;
  const refusedForeign = await dialA(name, { ...foreign.material, ca: valid.material.ca });
  t.equal(refusedForeign.opened, false, "another cluster's CA: refused");
  await a.waitFor((event) => event.msg === 'mesh TLS handshake refused', 10_000, from);
  const expired = await clusterCa.issue({ name, lifetimeMs: 60_000, notAfter: new Date(Date.now() - 60_000) });
  t.equal((await dialA(name, expired.material)).opened, false, 'an expired certificate: refused');
  t.match(await dialA(`zz-${B}`, valid.material), { opened: false, status: 403 }, 'a certificate naming another server than the one the link claims: refused');
  const revoked = await a.command<Result>('request', { envelope: { method: 'tls.revoke', master: true, data: valid.serial } });
  t.match(revoked.replies[0], { ok: true, result: { revoked: valid.serial } });
  t.match(await dialA(name, valid.material), { opened: false, status: 403 }, 'once revoked: refused');
  // The log line may reach the test after the answer did: wait for it.
  const logged = await a.waitFor((event) => event.msg === 'mesh handshake refused' && String(event.reason).includes('revoked'), 10_000);
  t.match(logged.reason, valid.serial, 'and logged as revoked');
  const again = await clusterCa.issue({ name, lifetimeMs: 60_000 });
  t.same(await dialA(name, again.material), { opened: true }, 'a new certificate of the same name still opens');
});

t.test("revoking a server's certificates closes the links that presented them; it renews at once and every link forms again", async (t) => {
  // B's links were opened with its first certificate (none has opened since); it now presents a renewed one.
  const first = b.events.find((event) => event.msg === 'mesh certificate issued by the cluster CA')!.serial as string;
  const current = [...b.events].reverse().find((event) => event.msg === 'mesh certificate renewed')!.serial as string;
  t.not(first, current);
  const fromA = a.events.length;
  const fromB = b.events.length;
  const fromC = c.events.length;
  for (const serial of [first, current]) {
    const revoked = await a.command<Result>('request', { envelope: { method: 'tls.revoke', master: true, data: serial } });
    t.match(revoked.replies[0], { ok: true, result: { revoked: serial } });
  }
  const closedByA = await a.waitFor((event) => event.msg === 'mesh link closed: its certificate no longer passes', 30_000, fromA);
  t.equal(closedByA.peer, B, 'the server that revoked them closes its link to B');
  const closedByC = await c.waitFor((event) => event.msg === 'mesh link closed: its certificate no longer passes', 30_000, fromC);
  t.equal(closedByC.peer, B, 'another server, reading the revoked serials from the store, closes its link to B too');
  await b.waitFor((event) => event.msg === "this server's mesh certificate was revoked: renewing it now", 30_000, fromB);
  const renewed = await b.waitFor((event) => event.msg === 'mesh certificate renewed', 30_000, fromB);
  t.not(renewed.serial, current, 'B has a new certificate');
  await Promise.all([waitForPeers(a, [B, C], 60_000), waitForPeers(b, [A, C], 60_000), waitForPeers(c, [A, B], 60_000)]);
  await t.resolves(b.command('mesh.send', { message: { method: 'mesh.echo', server: A, data: 'after' } }, 10_000), 'B reaches its peers again');
  t.notOk(a.events.slice(fromA).some((event) => event.msg === 'mesh link closed: its certificate no longer passes' && event.peer !== B), "no link of another server's certificate was closed");
});
