import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import t from 'tap';
import { tempDir, type ServerEvent, type ServerProcess } from '../helpers/server-process.js';
import { scaled, until } from '../helpers/wait.js';
import { SECRET, waitForPeers, type Result } from '../mesh/helpers.js';
import { cloudApi, clusterServer, clusterStore, failures } from '../e2e/autoscaler-cluster-fixture.js';
import type { EmbeddedStore } from '../../src/db/embedded/store.js';
import type { Tenant } from '../helpers/tenants.js';
import { killOnExit, run, tryRun, undoOnExit } from './cleanup.js';
import { HTTP_PORT, MESH_PORT, address, bridgePort, buildNetwork, hub, load, names, ns, skipReason, startClient, startInNamespace, urlOf, type Answer, type Client, type Name } from './netns.js';

// The namespaces of partition.test.ts, with the autoscaler on in each server. Two more faults:
// - a server that answers pings but drops data: the MTU of its bridge port lowered under established links, so
//   small frames (ACKs, WebSocket pings and pongs, small envelopes) pass and full-size segments to and from it
//   vanish (an MTU black hole). A link that then carries a large frame stalls: its pings wait behind the
//   undelivered bytes, the mesh drops it after its pong timeout, and requests through it fail within their
//   timeout instead of hanging for TCP's retransmission minutes;
// - one decider under partitions: below its minimum size the cluster wants a server every cooldown; with the
//   decider lease's holder cut off, then only the path between it and another server cut, the servers see
//   different meshes but share the store, and at most one scale-out happens per cooldown.

const SCHEDULE = { baseMs: 200, maxDelayMs: 1_500, jitterMinMs: 50, jitterMaxMs: 250, maxAttempts: 10 };
const PING_MS = 500;
const PONG_TIMEOUT_MS = 1_500;
const DIAL_TIMEOUT_MS = 10_000;
const RECONNECT_BOUND_MS = DIAL_TIMEOUT_MS + SCHEDULE.maxDelayMs + SCHEDULE.jitterMaxMs;
/** Below full-size segments (1500), above ACKs, pings and pongs. */
const LOW_MTU = 300;
/** A frame of many full-size segments. */
const BIG = 'x'.repeat(48 * 1024);
const REQUEST_TIMEOUT_MS = 5_000;
const CLOUD_PORT = 8099;
const COOLDOWN_MS = 3_000;
const POLICY = { minClusterSize: 50, maxClusterSize: 60, windowMs: 2_000, cooldownMs: COOLDOWN_MS, cpu: { scaleOutAbove: 100, scaleInBelow: 0 }, memory: { scaleOutAbove: 100, scaleInBelow: 0 } };
const LEASE = 'decider:default';

const why = skipReason;
if (why) t.plan(0, why);

// Two servers, a store and a client on a busy machine: starting them is most of the time.
t.setTimeout(300_000);

const servers = new Map<Name, ServerProcess>();
const ids = new Map<Name, string>();
const answers: Answer[] = [];
const cloudCalls: Array<{ path: string; at: number }> = [];
let client: Client;
let store: EmbeddedStore;
let platform: Tenant;
let stopCloud: (() => void) | undefined;

const server = (name: Name) => servers.get(name)!;
const others = (name: Name) => names.filter((other) => other !== name);
const peersOf = (name: Name, except: Name[] = []) => others(name).filter((other) => !except.includes(other)).map((other) => ids.get(other)!);
const fullMesh = (budgetMs: number) => Promise.all(names.map((name) => waitForPeers(server(name), peersOf(name), budgetMs)));
const nameOf = (id: unknown) => names.find((name) => ids.get(name) === id);
const meshEvents = (name: Name, kind: string, peer: Name, from: number) => server(name).events.slice(from).filter((event) => event.event === `mesh:${kind}` && event.peer === ids.get(peer));

/** A provider API in the client's namespace: `create` answers a new instance id at once (it starts nothing). */
async function startCloud(): Promise<string> {
  const script = `
    let instances = 0;
    require('node:http').createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        process.stdout.write(JSON.stringify({ path: req.url, at: Date.now() }) + '\\n');
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(req.url === '/create' ? { instanceId: 'i-' + ++instances } : { accepted: true }));
      });
    }).listen(${CLOUD_PORT}, '${address('x')}', () => process.stdout.write('{"listening":true}\\n'));`;
  const child = spawn('ip', ['netns', 'exec', ns('x'), process.execPath, '-e', script], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  killOnExit(child.pid);
  stopCloud = () => child.kill('SIGKILL');
  let listening = false;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const record = JSON.parse(line) as { listening?: true; path: string; at: number };
    if (record.listening) listening = true;
    else cloudCalls.push(record);
  });
  await until('the provider API to listen', () => (listening ? true : undefined), 20_000);
  return `http://${address('x')}:${CLOUD_PORT}`;
}

/** `/crud` of the platform through `to`, from the client's namespace. */
async function crud(to: Name, body: Record<string, unknown>): Promise<void> {
  const answer = await client.send(to, '/crud', { method: 'POST', headers: { host: platform.host, authorization: `Bearer ${platform.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (answer.status !== 200) throw new Error(`crud ${String(body.method)} ${String(body.collection)}: ${answer.status} ${answer.body ?? answer.error ?? ''}`);
}

if (!why) {
  t.before(async () => {
    buildNetwork({ gsoMaxSegs: 1 });
    client = startClient(answers);
    const cloudUrl = await startCloud();
    const cluster = await clusterStore(t);
    store = cluster.store;
    platform = cluster.platform;
    const run = randomBytes(3).toString('hex');
    names.forEach((name) => ids.set(name, `s${name}-${run}`));
    const start = (name: Name) =>
      startInNamespace(
        name,
        clusterServer(ids.get(name)!, cluster.dbPath, SECRET, {
          dataDir: name === 'a' ? cluster.dataDir : tempDir(),
          http: { port: HTTP_PORT, host: '0.0.0.0' },
          server: { id: ids.get(name)!, cluster: 'default', publicUrl: urlOf(name) },
          mesh: { host: address(name), port: MESH_PORT, url: `ws://${address(name)}:${MESH_PORT}`, secret: SECRET, discoveryIntervalMs: 500, pingIntervalMs: PING_MS, pongTimeoutMs: PONG_TIMEOUT_MS, reconnect: SCHEDULE },
        }),
      );
    servers.set('a', await start('a'));
    const [b, c] = await Promise.all([start('b'), start('c')]);
    servers.set('b', b).set('c', c);
    await fullMesh(30_000);
    await crud('b', { method: 'object.create', collection: 'apis', documents: [cloudApi('fakecloud', cloudUrl)] });
  });
  t.teardown(async () => {
    client?.stop();
    stopCloud?.();
    await Promise.all([...servers.values()].map((each) => each.stop()));
  });
}

const echo = (from: Name, to: Name, data: unknown) => server(from).command<{ ok: boolean; result?: { echo: unknown } }>('mesh.send', { message: { method: 'mesh.echo', server: ids.get(to), data, timeoutMs: REQUEST_TIMEOUT_MS } }, REQUEST_TIMEOUT_MS + 10_000);
const envelopeTo = (from: Name, to: Name, data: unknown) => server(from).command<Result>('request', { envelope: { method: 'probe', server: ids.get(to), data }, timeoutMs: REQUEST_TIMEOUT_MS }, REQUEST_TIMEOUT_MS + 10_000);
/** Large frames both ways between A and each peer: B's call to A's primary (echoed back), C's envelope to A. */
async function largeFramesFlow(): Promise<boolean> {
  const [fromB, fromA, fromC] = await Promise.all([echo('b', 'a', BIG), echo('a', 'b', BIG), envelopeTo('c', 'a', BIG)]);
  return fromB.ok && fromB.result?.echo === BIG && fromA.ok && fromA.result?.echo === BIG && fromC.replies.some((reply) => reply.server === ids.get('a') && reply.ok) && fromC.missing.length === 0;
}

t.test('a server that answers pings but drops data: its stalled links are dropped within the pong timeout, requests through them fail in time, the links come back once it is healed', async (t) => {
  t.ok(await largeFramesFlow(), 'before the fault, large frames flow to and from A');
  const marks = new Map(names.map((name) => [name, server(name).events.length]));
  const stop = load(client);
  run('ip', ['-n', hub, 'link', 'set', bridgePort('a'), 'mtu', String(LOW_MTU)]);
  const restore = undoOnExit(() => tryRun('ip', ['-n', hub, 'link', 'set', bridgePort('a'), 'mtu', '1500']));
  const small = await echo('b', 'a', 'small');
  t.same(small.result?.echo, 'small', `with A's port at MTU ${LOW_MTU}, a small call still reaches A and its answer comes back`);
  t.same((await server('b').command<Array<{ server: string }>>('mesh.peers')).map((peer) => peer.server).sort(), peersOf('b'), 'B is still linked to A: pings pass');

  const sentAt = Date.now();
  const [call, envelope] = await Promise.all([
    echo('b', 'a', BIG).then(
      (reply) => ({ error: undefined, reply, at: Date.now() }),
      (error: Error) => ({ error: error.message, reply: undefined, at: Date.now() }),
    ),
    envelopeTo('c', 'a', BIG).then((result) => ({ result, at: Date.now() })),
  ]);
  // Each end of a stalled link stops hearing pongs; the end that times out first drops it, the other may learn
  // of it from the close (a FIN behind no data) or time out too.
  const closeOf = (name: Name, peer: Name) => server(name).waitFor((event) => event.event === 'mesh:link:close' && event.peer === ids.get(peer), PING_MS + PONG_TIMEOUT_MS + 5_000, marks.get(name));
  const pairs = (['b', 'c'] as const).map((peer) => ({ peer, ends: [['a', peer], [peer, 'a']] as Array<[Name, Name]> }));
  // Healed even when a close never comes, so the next test runs on a whole network.
  const closes = await Promise.all(pairs.map(async ({ ends }) => Promise.all(ends.map(([name, peer]) => closeOf(name, peer))))).finally(restore);
  const healedAt = Date.now();
  await fullMesh(RECONNECT_BOUND_MS + 5_000);
  const backAt = Math.max(...names.flatMap((name) => others(name).map((peer) => (meshEvents(name, 'link:open', peer, marks.get(name)!).at(-1)?.at as number | undefined) ?? 0)));
  const flowsAgain = await largeFramesFlow();
  await stop();

  const reason = `no pong within ${PONG_TIMEOUT_MS} ms`;
  const warned = (name: Name, peer: Name) => server(name).events.slice(marks.get(name)).find((event) => event.msg === 'mesh peer did not answer a ping: dropping the link' && event.peer === ids.get(peer));
  const closedLine = (name: Name, peer: Name) => server(name).events.slice(marks.get(name)).find((event: ServerEvent) => event.msg === 'mesh link closed' && event.peer === ids.get(peer));
  const reachable = answers.filter((answer) => answer.startedAt >= sentAt && answer.to !== 'a');
  const seen = pairs.map(({ ends }, index) => ends.map(([name, other], end) => `${name} closed ${other} after ${(closes[index]![end]!.at as number) - sentAt} ms (${String(closes[index]![end]!.reason) || `code ${String(closes[index]![end]!.code)}`})`).join(', '));
  t.comment(
    `large frames sent; ${seen.join('; ')}; ` +
      `B's call failed after ${call.at - sentAt} ms (${call.error ?? 'answered'}), C's envelope ended after ${envelope.at - sentAt} ms (missing ${JSON.stringify(envelope.result.missing)}); ` +
      `links back ${backAt - healedAt} ms after healing; ${reachable.length} requests to B and C`,
  );
  for (const [index, { peer, ends }] of pairs.entries()) {
    const first = Math.min(...closes[index]!.map((event) => event.at as number));
    t.ok(first - sentAt <= PING_MS + PONG_TIMEOUT_MS + scaled(1_000), `the stalled A–${peer} link was dropped within a ping interval plus the pong timeout (and a second of scheduling)`);
    const timedOut = ends.filter(([name, other]) => warned(name, other));
    t.ok(timedOut.length > 0, `A–${peer}: ${timedOut.map(([name]) => name).join(' and ')} logged that the other did not answer a ping`);
    for (const [name, other] of timedOut) {
      t.equal(closedLine(name, other)?.reason, reason, `${name}'s "mesh link closed" line names ${other} and the reason`);
      t.equal(closes[index]![ends.findIndex(([end]) => end === name)]!.reason, reason, `${name}'s link:close event names the reason`);
    }
  }
  t.equal(call.reply, undefined, "B's large call to A got no answer");
  t.match(call.error, /unavailable: the link to .* closed before it replied|timeout: mesh\.echo: no reply/, `B's call failed with a clear error: ${call.error}`);
  t.ok(call.at - sentAt <= REQUEST_TIMEOUT_MS + scaled(1_000), "B's call ended within its timeout");
  t.same(envelope.result.missing, [{ server: ids.get('a') }], "C's envelope names A as missing");
  t.ok(envelope.at - sentAt <= REQUEST_TIMEOUT_MS + scaled(1_000), "C's envelope ended within its timeout");
  t.same(reachable.filter((answer) => answer.status !== 200).map((answer) => `${answer.to} ${answer.status} ${answer.error ?? ''}`), [], 'every request to B and C was answered');
  t.ok(reachable.length > 20, 'requests were sent throughout');
  t.ok(backAt - healedAt <= RECONNECT_BOUND_MS, `links back within ${RECONNECT_BOUND_MS} ms of healing`);
  t.ok(flowsAgain, 'once healed, large frames flow to and from A again');
});

t.test('autoscaler on, the lease holder cut off, then only its path to another server: at most one scale-out per cooldown, on whichever side', async (t) => {
  const realIds = new Set(ids.values());
  const decisions = () => names.flatMap((name) => server(name).events.filter((event) => event.msg === 'autoscaler decided scale-out (below-min)').map((event) => ({ name, at: Date.parse(String(event.time)) }))).sort((a, b) => a.at - b.at);
  // Every record a scale-out writes, seen by polling the shared store (a failed provider request deletes it).
  const records = new Map<string, number>();
  let polling = true;
  const poller = (async () => {
    while (polling) {
      for (const record of await store.collection<{ _id: string; master?: { createdAt?: string } }>('servers').find({ cluster_id: 'default' }, { limit: 0 })) {
        if (!realIds.has(record._id) && record.master?.createdAt && !records.has(record._id)) records.set(record._id, Date.parse(record.master.createdAt));
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  const more = (what: string, count: number) => {
    const target = decisions().length + count;
    return until(what, () => (decisions().length >= target ? true : undefined), (count + 2) * COOLDOWN_MS + 10_000, { last: () => decisions().length });
  };
  const phases: Array<{ phase: string; from: number }> = [];
  const phase = (name: string) => phases.push({ phase: name, from: Date.now() });
  const stop = load(client);
  try {
    phase('whole mesh');
    await crud('b', { method: 'object.create', collection: 'clusters', documents: [{ name: 'default', initialDeployment: { cloud: 'fakecloud' }, autoscaler: POLICY }] });
    await more('a first scale-out', 1);
    const holder = nameOf((await store.collection('fleetplane_leases').findOne({ _id: LEASE }))?.owner)!;
    t.ok(holder, `the lease is held by ${holder}`);

    phase(`${holder} cut off`);
    run('ip', ['-n', hub, 'link', 'set', bridgePort(holder), 'down']);
    const reconnect = undoOnExit(() => tryRun('ip', ['-n', hub, 'link', 'set', bridgePort(holder), 'up']));
    await Promise.all([...others(holder).map((name) => waitForPeers(server(name), peersOf(name, [holder]), 20_000)), waitForPeers(server(holder), [], 20_000)]);
    await more('two scale-outs while cut off', 2);
    run('ip', ['-n', hub, 'link', 'set', bridgePort(holder), 'up']);
    reconnect();
    await fullMesh(RECONNECT_BOUND_MS + 5_000);

    const [left, right] = [holder, others(holder)[0]!];
    phase(`path ${left}–${right} cut`);
    const routes: Array<[Name, Name]> = [
      [left, right],
      [right, left],
    ];
    for (const [from, to] of routes) run('ip', ['-n', ns(from), 'route', 'add', 'blackhole', `${address(to)}/32`]);
    const unroute = undoOnExit(() => routes.forEach(([from, to]) => tryRun('ip', ['-n', ns(from), 'route', 'del', 'blackhole', `${address(to)}/32`])));
    await Promise.all([waitForPeers(server(left), peersOf(left, [right]), 20_000), waitForPeers(server(right), peersOf(right, [left]), 20_000)]);
    await more('two scale-outs while the path is cut', 2);
    unroute();
    await fullMesh(SCHEDULE.maxDelayMs + SCHEDULE.jitterMaxMs + 10_000);

    phase('healed');
    await more('two scale-outs after healing', 2);
    await crud('b', { method: 'object.update', collection: 'clusters', filter: { name: 'default' }, update: { $set: { 'autoscaler.paused': true } } });
    // An action under way when the pause lands may still write its record: wait until the count stands still.
    let seen = -1;
    await until('the last action to land', async () => {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const now = decisions().length + records.size;
      if (now === seen) return true;
      seen = now;
      return undefined;
    }, 20_000);
  } finally {
    polling = false;
    await poller;
    await stop();
  }

  const decided = decisions();
  const recorded = [...records.values()].sort((a, b) => a - b);
  const created = cloudCalls.filter((call) => call.path === '/create').map((call) => call.at);
  const gaps = (times: number[]) => times.slice(1).map((at, index) => at - times[index]!);
  const phaseOf = (at: number) => [...phases].reverse().find((entry) => entry.from <= at)?.phase ?? 'before';
  const byPhase = phases.map(({ phase: name }) => `${name}: ${decided.filter((entry) => phaseOf(entry.at) === name).map((entry) => entry.name).join(',') || 'none'}`);
  t.comment(`${decided.length} decisions (${byPhase.join('; ')}); ${recorded.length} inventory records; ${created.length} provider creates; decision gaps ${gaps(decided.map((entry) => entry.at)).join(', ')} ms; record gaps ${gaps(recorded).join(', ')} ms`);
  t.ok(decided.length >= 7, 'the cluster kept growing through every phase');
  t.equal(recorded.length, decided.length, 'each decision wrote one record to the inventory');
  t.ok(created.length <= decided.length, 'no provider create without a decision');
  // A decision's log line and its record follow the lease check by the store's write time: a little on a busy host.
  for (const gap of gaps(decided.map((entry) => entry.at))) t.ok(gap >= COOLDOWN_MS - 500, `decisions, on whichever server, ${gap} ms apart: at most one per cooldown`);
  for (const gap of gaps(recorded)) t.ok(gap >= COOLDOWN_MS - 500, `scale-outs in the inventory ${gap} ms apart`);
  for (const name of names) t.same(failures(server(name).events.filter((event) => /lease/.test(String(event.msg ?? '')))), [], `${name}: nothing of the lease failed`);
});
