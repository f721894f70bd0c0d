import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createKey } from '../../src/auth/keys.js';
import { createOrganization } from '../../src/auth/organizations.js';
import { openStore } from '../../src/db/open.js';
import type { Store } from '../../src/db/types.js';
import { postgresUnavailable, startPostgres } from '../helpers/postgres.js';
import { FAST, ServerProcess, cleanEnv, fleetplane, request, tempDir, type ServerEvent } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';
import { MESH_FIXTURE } from '../mesh/helpers.js';
import { StoreLink } from './store-link.js';

// Two real servers on one real PostgreSQL, one of them with its clock moved by libfaketime (Debian's `faketime`),
// as two hosts whose clocks differ. The decider lease assumes clocks within autoscaler.maxClockSkewMs (1 s here):
// (a) inside it, a holder cut from the store stops on its own clock before the other may take over;
// (b) beyond it, the other takes over while the cut holder still believes it holds the lease, and what keeps the
//     store consistent then is fencing by term: the old holder's late decision write is refused.

t.setTimeout(600_000);

const MAX_SKEW_MS = 1_000;
const INTERVAL_MS = 500;
/** The lease's time to live: three intervals, at least 5 s (src/boot/autoscaler.ts). */
const TTL_MS = 5_000;
const COOLDOWN_MS = 4_000;
/** Far below its minimum: the cluster wants a new server every cooldown, whatever is pending. */
const POLICY = { minClusterSize: 50, maxClusterSize: 60, windowMs: 2_000, cooldownMs: COOLDOWN_MS, cpu: { scaleOutAbove: 100, scaleInBelow: 0 }, memory: { scaleOutAbove: 100, scaleInBelow: 0 } };

/** libfaketime's shared object, where Debian's package puts it (per architecture), if installed. */
function libfaketime(): string | undefined {
  const roots = ['/usr/lib', '/usr/local/lib', '/usr/lib64'];
  const dirs = roots.flatMap((root) => {
    try {
      return [root, ...readdirSync(root).filter((name) => name.endsWith('-linux-gnu')).map((name) => path.join(root, name))];
    } catch {
      return [];
    }
  });
  return dirs.map((dir) => path.join(dir, 'faketime', 'libfaketime.so.1')).find((file) => existsSync(file));
}

const LIBFAKETIME = libfaketime();

/** The environment of a process whose wall clock runs `seconds` ahead; its monotonic clock (Node's timers) is left alone. */
const skewed = (seconds: number): NodeJS.ProcessEnv => ({ LD_PRELOAD: LIBFAKETIME, FAKETIME: `+${seconds}`, FAKETIME_DONT_FAKE_MONOTONIC: '1' });

/** Why this file cannot run here: no faketime, a faketime that does not move Node's clock, or no PostgreSQL. */
function unavailable(): string | undefined {
  if (!LIBFAKETIME) return 'faketime is not installed (Debian package "faketime", which brings libfaketime)';
  const probe = spawnSync(process.execPath, ['-e', 'console.log(Date.now())'], { env: { ...cleanEnv(), ...skewed(30) }, encoding: 'utf8' });
  const offsetMs = Number(probe.stdout.trim()) - Date.now();
  if (!(offsetMs > 29_000 && offsetMs < 31_000)) return `libfaketime (${LIBFAKETIME}) does not move Node's Date.now() here: ${offsetMs} ms for +30 s`;
  return postgresUnavailable();
}

interface Create {
  at: number;
  serverId: string;
}

/** A cloud API on 127.0.0.1 answering `create` at once with a new instance id, or holding the next one until told. */
async function fakeCloud(t: Test) {
  const creates: Create[] = [];
  let instances = 0;
  const cloud = {
    creates,
    holdNext: false,
    held: undefined as (Create & { answer(): string }) | undefined,
    baseUrl: '',
  };
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url !== '/create') return void res.end('{"accepted":true}');
      const create = { at: Date.now(), serverId: String((JSON.parse(text || '{}') as { server_id?: unknown }).server_id) };
      creates.push(create);
      const answer = () => {
        const instanceId = `i-${++instances}`;
        res.end(JSON.stringify({ instanceId }));
        return instanceId;
      };
      if (!cloud.holdNext) return void answer();
      cloud.holdNext = false;
      cloud.held = { ...create, answer };
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
  cloud.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return cloud;
}

interface LeaseState {
  seenAt: number;
  owner: string;
  term: number;
  expiresAt: number;
  renewedAt: number;
}

/** The lease document as the store holds it, read every 50 ms: each change of owner, term or expiry, and when it was seen. */
function watchLease(store: Store, name: string) {
  const history: LeaseState[] = [];
  let watching = true;
  const loop = (async () => {
    while (watching) {
      const lease = await store
        .collection<LeaseState & { _id: string } & Record<string, unknown>>('fleetplane_leases')
        .findOne({ _id: name })
        .catch(() => null);
      const last = history.at(-1);
      if (lease && (lease.owner !== last?.owner || lease.term !== last.term || lease.expiresAt !== last.expiresAt)) {
        history.push({ seenAt: Date.now(), owner: lease.owner, term: lease.term, expiresAt: lease.expiresAt, renewedAt: lease.renewedAt });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return { history, stop: () => ((watching = false), loop) };
}

interface Status {
  deciding: boolean;
  lease: { owner: string; term: number } | null;
  lastAction?: { action: string; outcome?: string; error?: string };
}

interface Node {
  id: string;
  dataDir: string;
  process: ServerProcess;
  /** `autoscaler.status` as its primary answers it now; undefined when it cannot (its store cut). */
  status(): Promise<Status | undefined>;
  /** When a log line matching `pattern` arrived (this test's clock), waiting for it. */
  logged(what: string, pattern: RegExp, budgetMs?: number): Promise<{ at: number; event: ServerEvent }>;
  decisions(): number;
}

const started = (server: ServerProcess) => server.events.find((event) => event.event === 'started');

/** A server of `cluster` on the store through its own `link`, its clock `skewSeconds` ahead (none: the host's own). */
async function startNode(t: Test, id: string, cluster: string, url: string, link: StoreLink, skewSeconds?: number): Promise<Node> {
  const dataDir = tempDir('fleetplane-skew-');
  const config = {
    ...FAST,
    log: { level: 'info' },
    dataDir,
    workers: 1,
    http: { port: 0, host: '127.0.0.1' },
    server: { id, cluster },
    postgres: { url: link.url(url), maxPoolSize: 2, connectTimeoutMs: 1_000, operationTimeoutMs: 1_000 },
    // A mesh secret each: they share the store and nothing else, as servers that cannot reach each other.
    mesh: { port: 0, host: '127.0.0.1', secret: `mesh-secret-of-${id}-only-0123456789`, discoveryIntervalMs: 500, pingIntervalMs: 2_000, pongTimeoutMs: 5_000 },
    autoscaler: { enabled: true, intervalMs: INTERVAL_MS, sweepIntervalMs: 600_000, maxClockSkewMs: MAX_SKEW_MS },
  };
  const server = ServerProcess.spawn(MESH_FIXTURE, config, skewSeconds === undefined ? {} : skewed(skewSeconds));
  t.teardown(() => server.stop());
  await server.started(60_000);
  const arrivals = new Map<ServerEvent, number>();
  const stamp = () => {
    for (const event of server.events) if (!arrivals.has(event)) arrivals.set(event, Date.now());
  };
  return {
    id,
    dataDir,
    process: server,
    async status() {
      const result = await server.command<{ replies: Array<{ server: string; ok: boolean; result?: Status }> }>('request', { envelope: { method: 'autoscaler.status', master: true }, timeoutMs: 3_000 });
      return result.replies.find((reply) => reply.server === id && reply.ok)?.result;
    },
    async logged(what, pattern, budgetMs = 30_000) {
      const event = await until(`${id}: ${what}`, () => (stamp(), server.events.find((candidate) => typeof candidate.msg === 'string' && pattern.test(candidate.msg))), budgetMs);
      return { at: arrivals.get(event)!, event };
    },
    decisions: () => server.events.filter((event) => event.msg === 'autoscaler decided scale-out (below-min)').length,
  };
}

const why = unavailable();
if (why) {
  t.plan(0, why);
} else {
  const postgres = await startPostgres();
  t.teardown(() => postgres.stop());
  const store = await openStore({ dataDir: tempDir(), db: {}, mongodb: {}, postgres: { url: postgres.url() } });
  t.teardown(() => store.close());
  const platform = await createOrganization(store, { name: 'platform', hosts: ['platform.test'] });
  const adminKey = (await createKey(store, { organizationId: platform._id, name: 'admin', admin: true })).key;
  const target = { host: '127.0.0.1', port: postgres.port };

  const crud = async (node: Node, body: Record<string, unknown>) => {
    const reply = await request(started(node.process)!.port as number, '/crud', { host: 'platform.test', key: adminKey, body });
    if (reply.status !== 200) throw new Error(`crud ${String(body.method)} ${String(body.collection)}: ${reply.status} ${reply.body}`);
  };
  /** The cluster's provider (the fake cloud) and its document with the policy, written through `node`. */
  const autoscaled = async (node: Node, cluster: string, baseUrl: string) => {
    await crud(node, { method: 'object.create', collection: 'apis', documents: [{ name: cluster, baseUrl, timeoutMs: 60_000, endpoints: { create: { method: 'post', path: '/create' }, terminate: { method: 'post', path: '/terminate' } } }] });
    await crud(node, { method: 'object.create', collection: 'clusters', documents: [{ name: cluster, initialDeployment: { cloud: cluster }, autoscaler: POLICY }] });
  };
  const record = (id: string) => store.collection<{ _id: string; master?: { status?: string; servingSince?: unknown }; fence?: { term: number }; infrastructure?: { instanceId?: string } }>('servers').findOne({ _id: id });
  const confirmed = async (node: Node) => until(`${node.id} confirmed running`, async () => ((await record(node.id))?.master?.servingSince ? true : undefined), 60_000);
  const ownerIs = (history: LeaseState[], owner: string) => until(`the lease held by ${owner}`, () => history.find((state) => state.owner === owner), 60_000);

  t.test(`skew inside maxClockSkewMs (the taker 0.5 s ahead, ${MAX_SKEW_MS} ms assumed): the holder cut from the store stops within its TTL, the other takes over after TTL + maxClockSkewMs, never two holders, at most one action per cooldown`, async (t) => {
    const run = randomBytes(3).toString('hex');
    const cluster = `inside-${run}`;
    const lease = watchLease(store, `decider:${cluster}`);
    t.teardown(lease.stop);
    const cloud = await fakeCloud(t);
    const [linkA, linkB] = await Promise.all([StoreLink.open(target), StoreLink.open(target)]);
    t.teardown(() => Promise.all([linkA.close(), linkB.close()]));
    const a = await startNode(t, `a-${run}`, cluster, postgres.url(), linkA);
    await confirmed(a);
    await autoscaled(a, cluster, cloud.baseUrl);
    const first = await ownerIs(lease.history, a.id);
    const b = await startNode(t, `b-${run}`, cluster, postgres.url(), linkB, 0.5);
    await confirmed(b);
    // The status endpoint of both, every 300 ms from here on: never two say they decide in one round.
    const rounds: Array<{ at: number; deciding: string[] }> = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const answers = await Promise.all([a, b].map(async (node) => ((await node.status().catch(() => undefined))?.deciding ? node.id : undefined)));
        rounds.push({ at: Date.now(), deciding: answers.filter((id): id is string => id !== undefined) });
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    })();
    t.teardown(() => ((sampling = false), sampler));

    // a acts every cooldown; cut it from the store once its second action has fully landed (the instance recorded),
    // so that none is under way: its next one would come a cooldown later.
    await until('two scale-outs by a, none under way', async () => {
      const last = cloud.creates.at(-1);
      if (cloud.creates.length < 2 || a.decisions() !== cloud.creates.length) return undefined;
      return (await record(last!.serverId))?.infrastructure?.instanceId ? true : undefined;
    }, 30_000);
    const lastOfA = cloud.creates.at(-1)!;
    const createsBeforeCut = cloud.creates.length;
    const cutAt = Date.now();
    linkA.cut();

    const stopped = await a.logged('it stops deciding on its own clock', /^autoscaler lost the decider lease: it ran out before a renewal reached the store/, 20_000);
    const taken = await ownerIs(lease.history, b.id);
    const lastOfHolder = lease.history.filter((state) => state.owner === a.id).at(-1)!;
    // The take's own write: b's renewedAt (on b's clock, 0.5 s ahead) is when b judged the lease free.
    const takenAt = taken.renewedAt - 500;
    t.ok(taken.seenAt - takenAt < TTL_MS / 3, 'the first state of b seen is its take (no renewal could come before it was seen)');
    t.equal(taken.term, first.term + 1, `b took the lease in the next term (${taken.term})`);
    t.ok(stopped.at - cutAt <= TTL_MS + 1_000, `a stopped acting ${stopped.at - cutAt} ms after it was cut from the store (TTL ${TTL_MS} ms)`);
    t.ok(takenAt >= lastOfHolder.expiresAt, `never two holders: b took it ${takenAt - lastOfHolder.expiresAt} ms after a's own expiry`);
    t.comment(`takeover ${takenAt - cutAt} ms after the cut (TTL ${TTL_MS} + maxClockSkewMs ${MAX_SKEW_MS} − 500 ms of skew, less the time since a's last renewal ${cutAt - lastOfHolder.renewedAt} ms)`);
    t.equal(cloud.creates.filter((create) => create.at > cutAt && create.at < takenAt).length, 0, 'no action from the cut to the takeover');

    await b.logged('b claims the cluster in its term', new RegExp(`^autoscaler decides for the cluster in term ${taken.term}$`));
    linkA.restore();
    await until('two scale-outs by b', () => (b.decisions() >= 2 ? true : undefined), 30_000);
    t.match(await until("a's status once it reaches the store again", () => a.status().catch(() => undefined), 20_000), { deciding: false, lease: { owner: b.id, term: taken.term } }, 'a, back, says b decides');
    t.match(await b.status(), { deciding: true, lease: { owner: b.id, term: taken.term } });
    const ctl = await fleetplane(['ctl', 'scale', 'status', '--json', '--data-dir', b.dataDir]);
    t.match(JSON.parse(ctl.stdout).replies[0].result, { serverId: b.id, deciding: true, lease: { owner: b.id, term: taken.term } }, 'fleetplane ctl scale status on b says the same');

    sampling = false;
    await sampler;
    t.same(rounds.filter((round) => round.deciding.length > 1), [], `the status endpoints never showed two deciders in one round (${rounds.length} rounds)`);
    const owners = new Map<number, Set<string>>();
    for (const state of lease.history) owners.set(state.term, (owners.get(state.term) ?? new Set()).add(state.owner));
    for (const [term, holders] of owners) t.equal(holders.size, 1, `term ${term}: one holder (${[...holders].join(', ')})`);
    const gaps = cloud.creates.slice(1).map((create, index) => create.at - cloud.creates[index]!.at);
    // b's clock is 0.5 s ahead: it judges the cooldown since a's last action (recorded on a's clock) 0.5 s early.
    for (const gap of gaps) t.ok(gap >= COOLDOWN_MS - 500 - 250, `actions ${gap} ms apart (cooldown ${COOLDOWN_MS} ms, the clocks 500 ms apart)`);
    t.comment(`actions: ${createsBeforeCut} by a in term ${first.term}, ${cloud.creates.length - createsBeforeCut} by b in term ${taken.term}; gaps ${gaps.join(', ')} ms; the first action of b ${cloud.creates[createsBeforeCut]!.at - lastOfA.at} ms after the last of a`);
  });

  t.test(`skew beyond maxClockSkewMs (the taker 3 s ahead, ${MAX_SKEW_MS} ms assumed): the taker takes the lease while the cut holder still believes it holds it, and the holder's late decision write is refused by the store`, async (t) => {
    const run = randomBytes(3).toString('hex');
    const cluster = `beyond-${run}`;
    const lease = watchLease(store, `decider:${cluster}`);
    t.teardown(lease.stop);
    const cloud = await fakeCloud(t);
    const [linkA, linkB] = await Promise.all([StoreLink.open(target), StoreLink.open(target)]);
    t.teardown(() => Promise.all([linkA.close(), linkB.close()]));
    const a = await startNode(t, `a-${run}`, cluster, postgres.url(), linkA);
    await confirmed(a);
    const first = await ownerIs(lease.history, a.id);
    const b = await startNode(t, `b-${run}`, cluster, postgres.url(), linkB, 3);
    await confirmed(b);
    t.equal(lease.history.at(-1)!.owner, a.id, 'a renews every third of its TTL: b, however far ahead, sees the lease held');

    // a decides a scale-out; its provider request is held, and a is cut from the store while it waits for the answer.
    cloud.holdNext = true;
    await autoscaled(a, cluster, cloud.baseUrl);
    const held = await until("a's provider request", () => cloud.held, 30_000);
    t.match(await record(held.serverId), { master: { status: 'starting' }, fence: { term: first.term } }, "the new server's record, written in a's term");
    const cutAt = Date.now();
    linkA.cut();

    const taken = await ownerIs(lease.history, b.id);
    const holderExpiry = lease.history.filter((state) => state.owner === a.id).at(-1)!.expiresAt;
    const takenAt = taken.renewedAt - 3_000;
    t.equal(taken.term, first.term + 1);
    t.ok(takenAt < holderExpiry, `b took the lease ${takenAt - cutAt} ms after the cut, ${holderExpiry - takenAt} ms before a's own expiry: both believe they hold it`);
    await b.logged('b claims the cluster in its term', new RegExp(`^autoscaler decides for the cluster in term ${taken.term}$`));
    t.match(await record(held.serverId), { fence: { term: taken.term } }, "b's claim stamped its term on every record of the cluster");

    linkA.restore();
    const restoredAt = Date.now();
    t.ok(restoredAt < holderExpiry, `a reaches the store again ${holderExpiry - restoredAt} ms before its own expiry: it still believes it holds the lease`);
    const [statusA, statusB] = await Promise.all([a.status().catch(() => undefined), b.status()]);
    t.comment(`status right after: a deciding ${String(statusA?.deciding)}, b deciding ${String(statusB?.deciding)}`);
    const instance = held.answer();
    const refused = await a.logged('its late write refused', /^autoscaler stopped: recording instance i-\d+ of provider "[^"]+" in the record of \S+ refused: a term after \d+ of decider:/, 30_000);
    t.match(refused.event.msg, `recording instance ${instance}`, "a's decision write, sent after b's claim, was refused by the store");
    const after = await record(held.serverId);
    t.match(after, { master: { status: 'starting' }, fence: { term: taken.term } }, 'the record is as b claimed it');
    t.notOk(after?.infrastructure?.instanceId, "nothing of a's late write in it");
    t.match(await a.status(), { deciding: false, lease: { owner: b.id, term: taken.term }, lastAction: { action: 'scale-out', outcome: 'refused' } }, 'a stopped deciding');
    t.match(await b.status(), { deciding: true, lease: { owner: b.id, term: taken.term } });

    // b judges the cooldown since a's action on a clock 3 s ahead: the cooldown holds only up to the clock skew.
    await until("b's first action", () => (cloud.creates.length > 1 ? true : undefined), 30_000);
    t.comment(`b's first action ${cloud.creates[1]!.at - held.at} ms after a's decision (cooldown ${COOLDOWN_MS} ms)`);
    t.match(await record(cloud.creates[1]!.serverId), { fence: { term: taken.term } }, "b's action is of b's term");
  });
}
