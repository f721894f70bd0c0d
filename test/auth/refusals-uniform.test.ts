import t, { type Test } from 'tap';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createKey, generateKey, revokeKey } from '../../src/auth/keys.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ServerProcess } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { ProbeConnection, median, rotated, upgrade, type Timed } from './fixtures/refusal-probe.js';

/*
 * SPEC 8.7, measured from outside a real server (two workers) over real sockets: every way a key can fail gets
 * the same status at the same time, before and after its address reaches the failed-authentication limit (the
 * default one: 20 failures, one more every 500 ms, 429s held 500 ms), and the five kinds SPEC 8.7 names get the
 * same body too.
 *
 * Method. Every kind is sent 300 times per phase, interleaved: each connection sends rounds of all kinds, round r
 * of connection c in rotation r + c, so every kind takes every position alike and drifts of the machine's load
 * fall on all kinds alike. A sample is one request's time on an open keep-alive connection, as the client sees it.
 * Time is asserted by its lower bound only, which the server fixes whatever the machine's load: no refusal is
 * answered before the refusal floor (`auth.refusalFloorMs`, 5 ms) after it was sent, and no 429 before its hold
 * (500 ms). The kinds' medians and the largest gap between them are reported (as comments) beside; comparing
 * them is a measurement, not a test, on a shared machine. Statuses and bodies are checked on every answer.
 * Before the limit each client address (127.0.<attempt>.<n>) sends two rounds only, 16 failures of the 20 the
 * server allows it; after the limit one address (127.0.9.<attempt>) sends over 64 connections at once (their
 * starts staggered over one hold), after every connection has seen its first 429.
 */

t.setTimeout(600_000);

/** The default `auth.refusalFloorMs`: no refusal is answered sooner after its arrival. */
const FLOOR_MS = 5;
const PER_KIND = 128;
const FORBIDDEN = '{"error":{"code":"forbidden","message":"this request is not authorized here"}}';
const READ = { method: 'object.read', collection: 'apis' };

const { dataDir, tenants } = await dataDirWithTenants([
  { name: 'acme', hosts: ['a.test', 'a2.test'] },
  { name: 'globex', hosts: ['b.test'] },
]);
const [acme, globex] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
const onOtherHost = await createKey(store, { organizationId: acme.organization_id, name: 'a2 only', permissions: { object: true }, hosts: ['a2.test'] });
const revoked = await createKey(store, { organizationId: acme.organization_id, name: 'revoked', permissions: { object: true } });
await revokeKey(store, acme.organization_id, revoked.key_id);
const expired = await createKey(store, { organizationId: acme.organization_id, name: 'expired', permissions: { object: true }, expiresAt: '2020-01-01T00:00:00Z' });
const globexKeyId = globex.adminKey.split('.')[0]!;
await store.close();

interface Kind {
  name: string;
  host: () => string;
  authorization: () => string;
  /** The body of its 403, when it is not the uniform one (only a key's own holder hears these). */
  own?: string;
}

const kinds: Kind[] = [
  { name: 'unknown key id', host: () => 'a.test', authorization: () => `Bearer ${generateKey().key}` },
  { name: "existing key id, another organization's, wrong secret", host: () => 'a.test', authorization: () => `Bearer ${globexKeyId}.${generateKey().secret}` },
  { name: "another organization's key", host: () => 'a.test', authorization: () => `Bearer ${globex.adminKey}` },
  { name: 'a key used on a host outside its hosts', host: () => 'a.test', authorization: () => `Bearer ${onOtherHost.key}` },
  { name: 'unknown host', host: () => `h${randomBytes(6).toString('hex')}.test`, authorization: () => `Bearer ${acme.adminKey}` },
  { name: 'revoked key', host: () => 'a.test', authorization: () => `Bearer ${revoked.key}`, own: '{"error":{"code":"key_revoked","message":"this key has been revoked"}}' },
  { name: 'expired key', host: () => 'a.test', authorization: () => `Bearer ${expired.key}`, own: '{"error":{"code":"key_expired","message":"this key has expired"}}' },
  { name: 'malformed key', host: () => 'a.test', authorization: () => 'Bearer fpk_short.not-a-key', own: '{"error":{"code":"malformed_key","message":"the key is not in the fleetplane key format"}}' },
];

// Generous start budgets: the machine may be busy.
const server = await ServerProcess.start({ workers: { count: 2, readyTimeoutMs: 120_000 }, dataDir });
t.teardown(() => server.stop());
await server.readyWorkers(2, 0, 120_000);

/** Per kind, its answers; each sample knows the round it was sent in (one of every kind, back to back). */
type Sample = Timed & { round: string };
type Samples = Map<string, Sample[]>;

/** Sends `count` rounds of every kind on `connection`, in rotation from `offset`, into `samples`. */
async function rounds(connection: ProbeConnection, count: number, offset: number, samples: Samples, label: string): Promise<void> {
  for (let round = 0; round < count; round++) {
    for (const kind of rotated(kinds, offset + round)) {
      const answer = await connection.post('/crud', kind.host(), kind.authorization(), READ);
      samples.get(kind.name)!.push({ ...answer, round: `${label}/${round}` });
    }
  }
}

const emptySamples = (): Samples => new Map(kinds.map((kind) => [kind.name, []]));
const rounded = (ms: number) => Math.round(ms * 1000) / 1000;
const spread = (values: number[]) => Math.max(...values) - Math.min(...values);

/**
 * Each kind's median, and the largest gap between two kinds' medians. Also, per kind, the median of its
 * samples' differences from the median of their own round: the same comparison with the machine's slower
 * swings of load (which last longer than a round) taken out.
 */
function medians(samples: Samples): { byKind: Record<string, number>; gapMs: number; pairedGapMs: number } {
  const byKind = Object.fromEntries([...samples].map(([name, timed]) => [name, rounded(median(timed.map((sample) => sample.ms)))]));
  const roundMedians = new Map<string, number[]>();
  for (const timed of samples.values()) for (const sample of timed) roundMedians.set(sample.round, [...(roundMedians.get(sample.round) ?? []), sample.ms]);
  const centre = new Map([...roundMedians].map(([round, values]) => [round, median(values)]));
  const paired = [...samples.values()].map((timed) => median(timed.map((sample) => sample.ms - centre.get(sample.round)!)));
  return { byKind, gapMs: spread(Object.values(byKind)), pairedGapMs: spread(paired) };
}

async function beforeTheLimit(attempt: number): Promise<Samples> {
  const samples = emptySamples();
  // Two rounds per address: 16 failures, fewer than the 20 the server allows an address.
  for (let client = 0; client < PER_KIND / 2; client++) {
    const connection = new ProbeConnection(server.port, `127.0.${attempt + 1}.${client + 1}`);
    try {
      // The connection is opened and handed to its worker by a request that is no failure.
      await connection.get('/healthz');
      await rounds(connection, 2, client, samples, `${client}`);
    } finally {
      connection.close();
    }
  }
  return samples;
}

/** A multiple of the number of kinds, so that every kind is sent from every connection alike. */
const LIMITED_CONNECTIONS = 64;
const HOLD_MS = 500;

async function afterTheLimit(attempt: number): Promise<{ samples: Samples; validDuring: number[] }> {
  const address = `127.0.9.${attempt + 1}`;
  const connections = Array.from({ length: LIMITED_CONNECTIONS }, () => new ProbeConnection(server.port, address));
  try {
    // Every connection (both workers have some) fails until it is answered 429.
    await Promise.all(
      connections.map(async (connection) => {
        for (let tries = 0; tries < 200; tries++) {
          if ((await connection.post('/crud', 'a.test', `Bearer ${generateKey().key}`, READ)).status === 429) return;
        }
        throw new Error('never limited');
      }),
    );
    const samples = emptySamples();
    const validDuring: number[] = [];
    await Promise.all(
      connections.map(async (connection, index) => {
        // Staggered over one hold, so that answers are not all due in the same millisecond (the client's own
        // queue would then time them).
        await new Promise((resolve) => setTimeout(resolve, (index * HOLD_MS) / LIMITED_CONNECTIONS));
        await rounds(connection, Math.ceil(PER_KIND / LIMITED_CONNECTIONS), index, samples, `${index}`);
        // A valid key from the limited address, on a connection whose worker limits it.
        validDuring.push((await connection.post('/crud', 'a.test', `Bearer ${acme.adminKey}`, READ)).status);
      }),
    );
    return { samples, validDuring };
  } finally {
    for (const connection of connections) connection.close();
  }
}

/**
 * Measures once, checks every answer, asserts the lower bound of every answer's time and reports the medians.
 * The server keeps its deadlines on a millisecond clock, so a deadline can fall up to 1 ms before the exact one.
 */
async function measured(t: Test, measure: (attempt: number) => Promise<Samples>, check: (samples: Samples) => void, atLeastMs: number): Promise<void> {
  const samples = await measure(0);
  check(samples);
  const result = medians(samples);
  t.comment(`medians (ms) ${JSON.stringify(result.byKind)}; largest gap ${result.gapMs.toFixed(3)} ms, within rounds ${result.pairedGapMs.toFixed(3)} ms`);
  for (const [kind, answers] of samples) {
    const soonest = Math.min(...answers.map((answer) => answer.ms));
    t.ok(soonest >= atLeastMs - 1, `${kind}: no answer sooner than ${atLeastMs} ms (less the clock's 1 ms) after it was sent (soonest ${soonest.toFixed(3)} ms)`);
  }
}

t.test('before the limit: every kind of refusal is a 403, the five of SPEC 8.7 with one body, all at the same time', async (t) => {
  await measured(t, beforeTheLimit, (samples) => {
    for (const kind of kinds) {
      const answers = samples.get(kind.name)!;
      t.equal(answers.length, PER_KIND);
      t.same(new Set(answers.map((answer) => answer.status)), new Set([403]), `${kind.name}: 403 every time`);
      t.same(new Set(answers.map((answer) => answer.body)), new Set([kind.own ?? FORBIDDEN]), `${kind.name}: ${kind.own ? 'its own' : 'the uniform'} body`);
    }
  }, FLOOR_MS);
});

t.test('after the limit: every kind of refusal is the same held 429, at the same time; a valid key still passes', async (t) => {
  await measured(
    t,
    async (attempt) => {
      const { samples, validDuring } = await afterTheLimit(attempt);
      t.same(new Set(validDuring), new Set([200]), 'a valid key from the limited address is served on every connection');
      return samples;
    },
    (samples) => {
      for (const kind of kinds) {
        const answers = samples.get(kind.name)!;
        t.ok(answers.length >= PER_KIND, `${kind.name}: ${answers.length} answers`);
        t.same(new Set(answers.map((answer) => answer.status)), new Set([429]), `${kind.name}: 429 every time`);
        t.same(new Set(answers.map((answer) => JSON.parse(answer.body).error.code)), new Set(['too_many_requests']), `${kind.name}: too_many_requests`);
        t.ok(answers.every((answer) => Number(answer.retryAfter) >= 1), `${kind.name}: with Retry-After`);
      }
    },
    HOLD_MS,
  );
});

/** One upgrade of every kind at once from `address`: their statuses, by kind. */
const upgradeWave = async (address: string) => Promise.all(kinds.map(async (kind) => ({ kind, ...(await upgrade(server.port, address, kind.host(), kind.authorization())) })));

t.test('the WebSocket upgrade: every kind refused alike, limited alike, held alike; a valid key still opens', async (t) => {
  for (const [index, kind] of kinds.entries()) {
    const answer = await upgrade(server.port, `127.0.10.${index + 1}`, kind.host(), kind.authorization());
    t.equal(answer.status, 403, `${kind.name}: 403 before the limit`);
    t.equal(answer.body, kind.own ?? FORBIDDEN, `${kind.name}: the body an envelope route gives`);
  }
  // Waves of one upgrade of each kind, sent together from one address, until a wave is all 429.
  const address = '127.0.11.1';
  let waves = 0;
  while (waves++ < 30 && !(await upgradeWave(address)).every((answer) => answer.status === 429));
  t.ok(waves <= 30, `the address is limited after ${waves} waves`);
  for (let wave = 0; wave < 5; wave++) {
    for (const answer of await upgradeWave(address)) {
      t.equal(answer.status, 429, `wave ${wave}: ${answer.kind.name}: 429`);
      t.equal(JSON.parse(answer.body).error.code, 'too_many_requests');
    }
  }
  const valid = await upgrade(server.port, address, 'a.test', `Bearer ${acme.adminKey}`);
  t.equal(valid.status, 101, 'a valid key still opens a socket from the limited address');
});

t.test('every kind counts alike against one allowance per server, over HTTP and the upgrade, whichever worker it reaches', async (t) => {
  for (const [index, kind] of kinds.entries()) {
    for (const transport of ['http', 'upgrade'] as const) {
      const address = `127.0.12.${index * 2 + (transport === 'http' ? 1 : 2)}`;
      const started = Date.now();
      let refused = 0;
      // Four at a time, each on a connection of its own (handed to the workers in turn).
      for (let wave = 0; wave < 20; wave++) {
        const answers = await Promise.all(
          Array.from({ length: 4 }, async () => {
            if (transport === 'upgrade') return (await upgrade(server.port, address, kind.host(), kind.authorization())).status;
            const connection = new ProbeConnection(server.port, address);
            try {
              return (await connection.post('/crud', kind.host(), kind.authorization(), READ)).status;
            } finally {
              connection.close();
            }
          }),
        );
        refused += answers.filter((status) => status === 403).length;
        if (answers.every((status) => status === 429)) break;
      }
      // 20 at once, and one more for each 500 ms that passed meanwhile.
      const refilled = Math.floor((Date.now() - started) / 500);
      t.ok(refused >= 20 && refused <= 20 + refilled + 1, `${kind.name} over ${transport}: ${refused} refused with 403 before every answer was 429 (20, plus ${refilled} refilled)`);
    }
  }
});
