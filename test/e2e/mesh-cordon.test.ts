import t from 'tap';
import path from 'node:path';
import WebSocket from 'ws';
import { fleetplane, request } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { until } from '../helpers/wait.js';
import { meshConfig, meshIds, startMeshServer, waitForPeers, type Result } from '../mesh/helpers.js';

// Real processes on a shared machine: generous budgets, no fixed sleeps.
t.setTimeout(300_000);

/** `lifecycle.readinessGraceMs`'s default, equal to the default request timeout of `ctl` and of request(). */
const GRACE_MS = 5_000;
const REDIRECT = 'http://lb.example.test/';

/** A cordoned node's answer: the fallback's 307, once the grace is over. */
const cordoned = async (port: number) => ((await request(port, '/whoami')).status === 307 ? true : undefined);
/** An uncordoned node's answer: a worker's 200. */
const serving = async (port: number) => ((await request(port, '/whoami')).status === 200 ? true : undefined);

/** Sends one frame over the WebSocket and resolves with the answer carrying its `requestId`. */
function answerOver(socket: WebSocket, frame: Record<string, unknown>): Promise<any> {
  const requestId = Math.floor(Math.random() * 1e9);
  return new Promise((resolve) => {
    const onMessage = (data: WebSocket.RawData) => {
      const answer = JSON.parse(String(data));
      if (answer.id !== requestId) return;
      socket.off('message', onMessage);
      resolve(answer);
    };
    socket.on('message', onMessage);
    socket.send(JSON.stringify({ ...frame, requestId }));
  });
}

t.test('a cordon whose readiness grace lasts as long as the request timeout is answered as accepted, here and across the mesh, and the node is cordoned after the grace', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([{ name: 'platform', hosts: ['localhost', '127.0.0.1'] }]);
  const platform = tenants[0]!;
  const dbPath = path.join(dataDir, 'fleetplane.db');
  const { ids } = meshIds('a', 'b');
  const [A, B] = ids as [string, string];
  const configA = meshConfig(A, dbPath);
  const configB = meshConfig(B, dbPath, { lifecycle: { readinessGraceMs: GRACE_MS }, fallback: { redirect: REDIRECT } });
  const [a, b] = await Promise.all([startMeshServer(configA), startMeshServer(configB)]);
  t.teardown(() => Promise.all([a.stop(), b.stop()]));
  await waitForPeers(a, [B]);
  await waitForPeers(b, [A]);
  await until(`${B} serves`, () => serving(b.port));

  // The report: `ctl cordon --server node-b --value true` on node-a printed "node-b : no answer" and exited 1.
  const remote = await fleetplane(['ctl', 'cordon', '--server', B, '--value', 'true', '--json', '--data-dir', configA.dataDir]);
  t.equal(remote.status, 0, `ctl exits 0: ${remote.stdout}${remote.stderr}`);
  const remoteResult = JSON.parse(remote.stdout) as Result;
  t.same(remoteResult.missing, [], 'no target is missing');
  t.match(remoteResult.replies, [{ server: B, worker: 0, ok: true, result: { accepted: true, effectiveInMs: GRACE_MS } }], "the remote primary's reply: accepted, in effect after the grace");
  const readyz = await request(b.port, '/readyz');
  t.equal(readyz.status, 503, `${B} answers /readyz 503 from the start of the grace`);
  await until(`${B} cordoned: its primary answers the fallback`, () => cordoned(b.port));
  t.equal((await request(b.port, '/whoami')).headers.location, `${REDIRECT}whoami`, 'the 307 names the fallback target');

  const uncordon = await fleetplane(['ctl', 'cordon', '--server', B, '--value', 'false', '--data-dir', configA.dataDir]);
  t.equal(uncordon.status, 0, `uncordon exits 0: ${uncordon.stdout}${uncordon.stderr}`);
  await until(`${B} serves again`, () => serving(b.port));

  // The same remote cordon over POST /control on node-a: a 200 with the accepted reply, nothing missing.
  const overHttp = await request(a.port, '/control', { host: 'localhost', key: platform.adminKey, body: { method: 'cordon', server: B, value: true } });
  t.equal(overHttp.status, 200, overHttp.body);
  t.match(overHttp.json(), { replies: [{ server: B, worker: 0, ok: true, result: { accepted: true, effectiveInMs: GRACE_MS } }], missing: [] }, 'POST /control: accepted');
  await until(`${B} cordoned through /control`, () => cordoned(b.port));
  t.equal((await request(a.port, '/control', { host: 'localhost', key: platform.adminKey, body: { method: 'cordon', server: B, value: false } })).status, 200);
  await until(`${B} serves again`, () => serving(b.port));

  // Over node-a's WebSocket, to each of node-b's workers: the last one serving waits the grace, and says so.
  const socket = new WebSocket(`ws://127.0.0.1:${a.port}/ws`, { headers: { host: 'localhost', authorization: `Bearer ${platform.adminKey}` }, perMessageDeflate: false });
  t.teardown(() => socket.terminate());
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const overWs = await answerOver(socket, { method: 'cordon', server: B, broadcast: true, value: true });
  t.equal(overWs.ok, true, JSON.stringify(overWs));
  t.same(overWs.result.missing, [], 'every worker of node-b answered');
  t.same(overWs.result.replies.map((reply: { worker: number }) => reply.worker).sort(), [1, 2]);
  t.ok(overWs.result.replies.every((reply: { ok: boolean }) => reply.ok), 'each one ok');
  t.equal(overWs.result.replies.filter((reply: { result: { accepted?: boolean } }) => reply.result.accepted === true).length, 1, 'one of them waits the readiness grace, answered as accepted');
  await until(`${B} cordoned over the WebSocket`, () => cordoned(b.port));

  // Local, on node-b's own control socket: an uncordon acts at once; a cordon of every worker is accepted.
  t.equal((await fleetplane(['ctl', 'cordon', '--master', '--value', 'false', '--data-dir', configB.dataDir])).status, 0);
  await until(`${B} serves again`, () => serving(b.port));
  const local = await fleetplane(['ctl', 'cordon', '--master', '--value', 'true', '--json', '--data-dir', configB.dataDir]);
  t.equal(local.status, 0, `a local cordon exits 0: ${local.stdout}${local.stderr}`);
  t.match(JSON.parse(local.stdout), { replies: [{ server: B, worker: 0, ok: true, result: { accepted: true, effectiveInMs: GRACE_MS } }], missing: [] });
  await until(`${B} cordoned locally`, () => cordoned(b.port));
});
