// The data and request bodies the envelope benchmarks share (bench/envelope.mjs, bench/envelope-profile.mjs):
// one organization with an admin key, the `echo` workflow, the `echo` API provider pointing at a local upstream,
// and an `items` collection with the row `object.read` fetches by id.
import path from 'node:path';

export const BODY_BYTES = 300;

/** A JSON text of exactly BODY_BYTES bytes: `make(padding)` with the padding grown to fit. */
export function sized(make) {
  const empty = JSON.stringify(make(''));
  const text = JSON.stringify(make('x'.repeat(BODY_BYTES - Buffer.byteLength(empty))));
  if (Buffer.byteLength(text) !== BODY_BYTES) throw new Error(`body is ${Buffer.byteLength(text)} bytes, not ${BODY_BYTES}`);
  return text;
}

/** Seeds `dataDir/fleetplane.db` (the embedded store) and returns what the requests need. */
export async function seedEnvelopeData(dataDir, upstreamPort) {
  const { EmbeddedStore } = await import('../../dist/src/db/embedded/store.js');
  const { ensureStandardIndexes } = await import('../../dist/src/db/open.js');
  const { createOrganization } = await import('../../dist/src/auth/organizations.js');
  const { createKey } = await import('../../dist/src/auth/keys.js');
  const dbFile = path.join(dataDir, 'fleetplane.db');
  const store = await EmbeddedStore.open(dbFile);
  await ensureStandardIndexes(store);
  const organization = await createOrganization(store, { name: 'bench', hosts: ['127.0.0.1', 'localhost'] });
  const { key } = await createKey(store, { organizationId: organization._id, name: 'bench', admin: true });
  const scope = store.forOrganization(organization._id);
  await scope.collection('workflows').insertOne({ name: 'echo', steps: [], output: '${input}' });
  await scope.collection('apis').insertOne({ name: 'echo', baseUrl: `http://127.0.0.1:${upstreamPort}`, timeoutMs: 10_000, endpoints: { create: { method: 'post', path: '/items/{id}' } } });
  // The row read by id: about BODY_BYTES of JSON once stored, among a few hundred others of the organization.
  const items = scope.collection('items');
  for (let index = 0; index < 300; index += 1) await items.insertOne({ name: `item-${index}`, text: 'x'.repeat(200) });
  const { insertedId: itemId } = await items.insertOne({ name: 'bench', labels: ['a', 'b'], text: 'x'.repeat(180) });
  await store.close();

  const json = { 'content-type': 'application/json' };
  return {
    dbFile,
    organizationId: organization._id,
    itemId,
    key,
    json,
    withKey: { ...json, authorization: `Bearer ${key}` },
    bodies: {
      workflow: sized((pad) => ({ echo: [{ id: 'bench', text: pad }] })),
      api: sized((pad) => ({ api: 'echo', endpoint: 'create', method: 'post', data: { id: 'bench', text: pad } })),
      crud: JSON.stringify({ method: 'object.read', collection: 'items', filter: { _id: itemId } }),
    },
    /** Whether a 200 reply of each route is the answer it should be. */
    answers: {
      workflow: (reply) => reply.echo?.[0]?.id === 'bench',
      api: (reply) => reply.status === 201 && reply.data?.id === 'bench',
      crud: (reply) => reply.documents?.length === 1 && reply.documents[0]._id === itemId && reply.documents[0].name === 'bench',
      healthz: (reply) => reply.status === 'ready' && typeof reply.server === 'string',
    },
  };
}

/** The routes the profiling benchmarks take, each with its baseline: bench/envelope.mjs in its bare role. */
export const ENVELOPE_ROUTES = {
  workflow: { path: '/workflows/echo', barePath: '/echo', what: '`POST /workflows/echo`', bare: 'bare Fastify POST echo', peer: 'the peer P, `POST /echo`' },
  api: { path: '/api', barePath: '/proxy', what: '`POST /api` → local upstream', bare: 'bare Fastify POST → undici → the same upstream', peer: 'the peer P, `POST /proxy` → undici → the same upstream' },
  crud: { path: '/crud', barePath: '/read', what: '`POST /crud` `object.read` by `_id`', bare: 'bare Fastify POST → the same better-sqlite3 statement', peer: 'the peer P, `POST /read` → the same better-sqlite3 statement' },
  // Not an envelope route: the probe bench/runtime's keep-alive figure loads, against the same bare route.
  healthz: { method: 'GET', path: '/healthz', barePath: '/healthz', what: '`GET /healthz`', bare: 'bare Fastify GET /healthz (bench/fixtures/bare-healthz.mjs)' },
};

/**
 * Starts one side of a route in its own process: a single-process Fleetplane (`workers: 0`, so the process
 * that serves is the one measured), the bare baseline, or the hand-written peer P (bench/fixtures/peer-service.mjs,
 * side `peer`: same paths as the bare baseline, the Bearer key required), with `execArgv`. Answers the fixture,
 * its port and pid, and the autocannon request, once one request got the answer it should.
 */
export async function startEnvelopeSide(name, side, { data, dataDir, upstreamPort, execArgv, connections }) {
  const { Fixture } = await import('./procs.mjs');
  const route = ENVELOPE_ROUTES[name];
  const env = { BENCH_UPSTREAM_PORT: String(upstreamPort), BENCH_DB_FILE: data.dbFile, BENCH_ORGANIZATION_ID: data.organizationId };
  const server =
    side === 'candidate'
      ? new Fixture('fleetplane.mjs', { BENCH_FP_CONFIG: JSON.stringify({ dataDir, workers: 0, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn', requests: false } }) }, { execArgv })
      : side === 'peer'
        ? new Fixture('peer-service.mjs', { ...env, BENCH_PEER_KEY: data.key }, { execArgv })
        : new Fixture('../envelope.mjs', { BENCH_ENVELOPE_ROLE: 'bare', ...env }, { execArgv });
  try {
    const { port, pid } = await server.ready(60_000);
    const method = route.method ?? 'POST';
    const request = {
      url: `http://127.0.0.1:${port}${side === 'candidate' ? route.path : route.barePath}`,
      method,
      ...(method === 'POST' ? { body: data.bodies[name], headers: side === 'baseline' ? data.json : data.withKey } : {}),
      connections,
    };
    const response = await fetch(request.url, { method, body: request.body, headers: request.headers });
    const reply = await response.json();
    if (response.status !== 200 || !data.answers[name](reply)) throw new Error(`${request.url} answered ${response.status} ${JSON.stringify(reply).slice(0, 200)}`);
    return { server, port, pid, request };
  } catch (error) {
    await server.stop();
    throw error;
  }
}
