import t, { type Test } from 'tap';
import type { ServerEvent, ServerProcess } from '../helpers/server-process.js';
import { meshConfig, meshIds, waitForPeers } from '../mesh/helpers.js';
import { run, tryRun, undoOnExit } from './cleanup.js';
import { HTTP_PORT, MESH_PORT, address, bridgePort, buildNetwork, hub, load as loadOn, names, ns, skipReason, startClient, startInNamespace, urlOf, type Answer, type Client, type Name } from './netns.js';

// Three servers, each in its own network namespace, joined by a bridge in a fourth (the hub); the client runs
// in a fifth. They share one embedded store file, as the "three servers on one host" recipe does. Faults: one
// server cut off (its bridge port down) and healed; only the path between two servers cut (blackhole routes on
// both sides) and healed. Throughout, every request to a server the client can reach is answered, the
// cordoned server's fallback never redirects to a peer it knows to be gone, and after healing the links come
// back within one dial timeout plus the capped reconnect delay, each dialer retrying at most once per step.

const SCHEDULE = { baseMs: 200, maxDelayMs: 1_500, jitterMinMs: 50, jitterMaxMs: 250, maxAttempts: 10 };
/** The dialer's WebSocket handshake timeout: a dial started while its SYNs were dropped ends within it. */
const DIAL_TIMEOUT_MS = 10_000;
const RECONNECT_BOUND_MS = DIAL_TIMEOUT_MS + SCHEDULE.maxDelayMs + SCHEDULE.jitterMaxMs;

const why = skipReason;
if (why) t.plan(0, why);

const servers = new Map<Name, ServerProcess>();
const ids = new Map<Name, string>();
const answers: Answer[] = [];
let client: Client;

function startServer(name: Name, id: string, dbPath: string): Promise<ServerProcess> {
  const config = meshConfig(id, dbPath, {
    workers: 1,
    http: { port: HTTP_PORT, host: '0.0.0.0' },
    server: { id, cluster: 'mesh-test', publicUrl: urlOf(name) },
    mesh: { host: address(name), port: MESH_PORT, url: `ws://${address(name)}:${MESH_PORT}`, pingIntervalMs: 500, pongTimeoutMs: 1_500, reconnect: SCHEDULE },
  });
  return startInNamespace(name, config);
}

const others = (name: Name) => names.filter((other) => other !== name);
const peersOf = (name: Name, except: Name[] = []) => others(name).filter((other) => !except.includes(other)).map((other) => ids.get(other)!);
const fullMesh = (timeoutMs: number) => Promise.all(names.map((name) => waitForPeers(servers.get(name)!, peersOf(name), timeoutMs)));
const server = (name: Name) => servers.get(name)!;
const nameOf = (id: unknown) => names.find((name) => ids.get(name) === id);

const load = () => loadOn(client);

/** The mesh events of `name` since `from` about `peer`. */
const meshEvents = (name: Name, kind: string, peer: Name, from: number) => server(name).events.slice(from).filter((event) => event.event === `mesh:${kind}` && event.peer === ids.get(peer));

/**
 * Each dialer's reconnects since `from`: attempts count up by one from 0 with no repeat (at most one per backoff
 * step), and each comes no sooner than the delay the previous one announced.
 */
function checkBackoff(t: Test, marks: Map<Name, number>, pairs: Array<[Name, Name]>): void {
  for (const [from, to] of pairs) {
    const retries = meshEvents(from, 'reconnect', to, marks.get(from)!);
    const attempts = retries.map((event) => event.attempt as number);
    t.same(attempts, attempts.map((_, index) => index), `${from} → ${to}: reconnect attempts ${JSON.stringify(attempts)}, one per backoff step`);
    const early = retries.slice(1).filter((event, index) => (event.at as number) - (retries[index]!.at as number) < (retries[index]!.delayMs as number) - 5);
    t.same(early, [], `${from} → ${to}: no retry before the previous delay ran out`);
  }
}

if (!why) {
  t.before(async () => {
    buildNetwork();
    client = startClient(answers);
    const { dbPath, ids: list } = meshIds('na', 'nb', 'nc');
    names.forEach((name, index) => ids.set(name, list[index]!));
    // The first server creates the store's schema; the others open it after.
    servers.set('a', await startServer('a', ids.get('a')!, dbPath));
    const [b, c] = await Promise.all([startServer('b', ids.get('b')!, dbPath), startServer('c', ids.get('c')!, dbPath)]);
    servers.set('b', b).set('c', c);
    await fullMesh(30_000);
    // C takes no connections of its own: every request to it is answered by its fallback, a 307 to a peer.
    await server('c').command('cordon', { value: true });
    const redirected = await client.send('c', '/whoami');
    if (redirected.status !== 307) throw new Error(`the cordoned server answered ${redirected.status}, not 307`);
  });
  t.teardown(async () => {
    client?.stop();
    await Promise.all([...servers.values()].map((each) => each.stop()));
  });
}

const expected = (answer: Answer) => (answer.to === 'c' ? answer.status === 307 && (answer.location?.startsWith(urlOf('a')) || answer.location?.startsWith(urlOf('b'))) : answer.status === 200);
const describe = (answer: Answer) => `${answer.to} ${answer.status} ${answer.location ?? answer.error ?? ''}`;

t.test('one server cut off and healed: the others answer every request, the fallback stops naming it, the links come back', async (t) => {
  const marks = new Map(names.map((name) => [name, server(name).events.length]));
  const stop = load();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const cutAt = Date.now();
  run('ip', ['-n', hub, 'link', 'set', bridgePort('a'), 'down']);
  const restore = undoOnExit(() => tryRun('ip', ['-n', hub, 'link', 'set', bridgePort('a'), 'up']));
  // B and C notice through their pings; A notices the same way from its side.
  await Promise.all([waitForPeers(server('b'), peersOf('b', ['a']), 20_000), waitForPeers(server('c'), peersOf('c', ['a']), 20_000), waitForPeers(server('a'), [], 20_000)]);
  const noticed = (await server('c').waitFor((event) => event.event === 'mesh:link:close' && event.peer === ids.get('a'), 1_000, marks.get('c'))).at as number;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, cutAt + 6_000 - Date.now())));
  run('ip', ['-n', hub, 'link', 'set', bridgePort('a'), 'up']);
  restore();
  const healedAt = Date.now();
  await fullMesh(RECONNECT_BOUND_MS + 5_000);
  const linkedAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 500));
  await stop();

  const reachable = answers.filter((answer) => answer.startedAt >= cutAt && answer.to !== 'a');
  const toA = answers.filter((answer) => answer.startedAt >= cutAt && answer.startedAt < healedAt && answer.to === 'a');
  const backAt = Math.max(...names.flatMap((name) => others(name).map((peer) => (meshEvents(name, 'link:open', peer, marks.get(name)!).at(-1)?.at as number | undefined) ?? 0)));
  const cRelinkedA = (meshEvents('c', 'link:open', 'a', marks.get('c')!)[0]?.at as number | undefined) ?? linkedAt;
  const redirectsToGone = reachable.filter((answer) => answer.to === 'c' && answer.startedAt >= noticed && answer.endedAt <= cRelinkedA && answer.location?.startsWith(urlOf('a')));
  const beforeNotice = reachable.filter((answer) => answer.to === 'c' && answer.startedAt < noticed && answer.location?.startsWith(urlOf('a'))).length;
  t.comment(
    `cut ${healedAt - cutAt} ms; C noticed after ${noticed - cutAt} ms (${beforeNotice} redirects to A before that); links back ${backAt - healedAt} ms after healing; ` +
      `requests to B and C: ${reachable.length}, to A while cut: ${toA.length} (${toA.filter((answer) => answer.status === 0).length} unanswered)`,
  );
  t.same(reachable.filter((answer) => !expected(answer)).map(describe), [], 'every request to B and C was answered (B 200, C its 307)');
  t.ok(reachable.length > 50, 'requests were sent throughout');
  t.same(redirectsToGone.map(describe), [], 'once C dropped A, its fallback never redirected to A until A was back');
  t.ok(noticed - cutAt <= 500 + 1_500 + 1_000, 'C noticed within a ping interval plus the pong timeout (and a second of scheduling)');
  t.ok(backAt - healedAt <= RECONNECT_BOUND_MS, `links back within ${RECONNECT_BOUND_MS} ms of healing`);
  checkBackoff(t, marks, names.flatMap((name) => others(name).map((peer) => [name, peer] as [Name, Name])));
  const answeredAfter = answers.filter((answer) => answer.to === 'a' && answer.startedAt >= linkedAt);
  t.ok(answeredAfter.length > 0 && answeredAfter.every((answer) => answer.status === 200), 'A answers again once healed');
});

t.test('only the path between A and B cut: C keeps both, every server answers every request, the link comes back', async (t) => {
  const marks = new Map(names.map((name) => [name, server(name).events.length]));
  const stop = load();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const cutAt = Date.now();
  const routes: Array<[Name, Name]> = [
    ['a', 'b'],
    ['b', 'a'],
  ];
  for (const [from, to] of routes) run('ip', ['-n', ns(from), 'route', 'add', 'blackhole', `${address(to)}/32`]);
  const restore = undoOnExit(() => routes.forEach(([from, to]) => tryRun('ip', ['-n', ns(from), 'route', 'del', 'blackhole', `${address(to)}/32`])));
  await Promise.all([waitForPeers(server('a'), peersOf('a', ['b']), 20_000), waitForPeers(server('b'), peersOf('b', ['a']), 20_000)]);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, cutAt + 5_000 - Date.now())));
  const cPeers = await server('c').command<Array<{ server: string }>>('mesh.peers');
  restore();
  const healedAt = Date.now();
  await fullMesh(SCHEDULE.maxDelayMs + SCHEDULE.jitterMaxMs + 5_000);
  const backAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 500));
  await stop();

  const since = answers.filter((answer) => answer.startedAt >= cutAt);
  t.comment(`cut ${healedAt - cutAt} ms; links back ${backAt - healedAt} ms after healing (seen by polling); ${since.length} requests`);
  t.same(cPeers.map((peer) => nameOf(peer.server)).sort(), ['a', 'b'], 'C stayed linked to both during the cut');
  t.same(since.filter((answer) => !expected(answer)).map(describe), [], 'every request to every server was answered');
  t.equal(meshEvents('c', 'link:close', 'a', marks.get('c')!).length + meshEvents('c', 'link:close', 'b', marks.get('c')!).length, 0, "C's links never dropped");
  // Blackholed dials fail at once, so the dialer goes through several steps during the cut.
  const [dialer, dialed] = ids.get('a')! > ids.get('b')! ? (['a', 'b'] as const) : (['b', 'a'] as const);
  t.ok(meshEvents(dialer, 'reconnect', dialed, marks.get(dialer)!).length >= 2, `${dialer} retried ${dialed} on its schedule during the cut`);
  checkBackoff(t, marks, [
    ['a', 'b'],
    ['b', 'a'],
  ]);
  const opened = meshEvents(dialer, 'link:open', dialed, marks.get(dialer)!).map((event: ServerEvent) => event.at as number);
  t.equal(opened.length, 1, 'one new link between A and B');
  t.ok(opened[0]! - healedAt <= SCHEDULE.maxDelayMs + SCHEDULE.jitterMaxMs + 1_000, 'the link came back within the capped reconnect delay of healing');
});
