import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { postgresUnavailable, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { CLI, FAST, cleanEnv, tempDir, withBudgets, type ServerProcess } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';
import { SECRET, waitForPeers } from '../mesh/helpers.js';
import { killOnExit } from './cleanup.js';
import { HTTP_PORT, MESH_PORT, address, buildNetwork, names, ns, skipReason as netnsSkipReason, startClient, startInNamespace, urlOf, type Answer, type Client, type Member, type Name } from './netns.js';

// Three servers on three hosts: each in its own network namespace with its own data directory, sharing nothing
// but PostgreSQL, which runs in a namespace of its own; all joined by the bridge of netns.ts, with the client
// (and a fake cloud for the autoscaler) in `x` and the sink that drops cut paths in `s`. The servers run the
// autoscaler on the cluster `default`, whose policy wants a new server every cooldown (below its minimum size).

export const PLATFORM_HOST = 'platform.test';
export const CLOUD_PORT = 8099;
export const COOLDOWN_MS = 3_000;
export const POLICY = { minClusterSize: 60, maxClusterSize: 70, windowMs: 2_000, cooldownMs: COOLDOWN_MS, cpu: { scaleOutAbove: 100, scaleInBelow: 0 }, memory: { scaleOutAbove: 100, scaleInBelow: 0 } };
export const SCHEDULE = { baseMs: 200, maxDelayMs: 1_500, jitterMinMs: 50, jitterMaxMs: 250, maxAttempts: 10 };
/** A dial whose SYNs were dropped ends within the WebSocket handshake timeout; then the capped delay. */
export const RECONNECT_BOUND_MS = 10_000 + SCHEDULE.maxDelayMs + SCHEDULE.jitterMaxMs;

/** Why these tests cannot run here, or undefined. */
export const skipReason = netnsSkipReason ?? postgresUnavailable();

export interface Key {
  id: string;
  key: string;
}

export interface Multihost {
  store: PostgresServer;
  servers: Map<Name, ServerProcess>;
  ids: Map<Name, string>;
  client: Client;
  /** Every answer the client got, in the order they came. */
  answers: Answer[];
  adminKey: string;
  /** Keys holding `object.read` only, each revoked once by a test (`nextKey`). */
  spareKeys: Key[];
  /** When the fake cloud was asked to create a server. */
  cloudCreates: number[];
  stopCloud: () => void;
}

/** `fleetplane <args>` run in `name`'s namespace with `config` as its config file. */
export function fleetplaneIn(name: Member, configFile: string, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn('ip', ['netns', 'exec', ns(name), process.execPath, CLI, ...args, '--config', configFile], { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv() });
  killOnExit(child.pid);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.once('exit', (status) => resolve({ status, stdout, stderr })));
}

/** A provider API in the client's namespace: `create` answers a new instance id at once (it starts nothing). */
async function startCloud(creates: number[]): Promise<{ url: string; stop: () => void }> {
  const script = `
    let instances = 0;
    require('node:http').createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/create') process.stdout.write(JSON.stringify({ created: Date.now() }) + '\\n');
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(req.url === '/create' ? { instanceId: 'i-' + ++instances } : { accepted: true }));
      });
    }).listen(${CLOUD_PORT}, '${address('x')}', () => process.stdout.write('{"listening":true}\\n'));`;
  const child = spawn('ip', ['netns', 'exec', ns('x'), process.execPath, '-e', script], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  killOnExit(child.pid);
  let listening = false;
  createInterface({ input: child.stdout }).on('line', (line) => {
    const record = JSON.parse(line) as { listening?: true; created?: number };
    if (record.listening) listening = true;
    if (record.created) creates.push(record.created);
  });
  await until('the provider API to listen', () => (listening ? true : undefined), 20_000);
  return { url: `http://${address('x')}:${CLOUD_PORT}`, stop: () => child.kill('SIGKILL') };
}

/** Config of server `name`: its own data directory, the store over the bridge, short mesh and autoscaler timings, the store's own defaults. */
export function serverConfig(name: Name, id: string, storeUrl: string): Record<string, unknown> {
  return withBudgets({
    ...FAST,
    log: { level: 'info' },
    workers: 1,
    dataDir: tempDir('fleetplane-multihost-'),
    http: { port: HTTP_PORT, host: '0.0.0.0' },
    server: { id, cluster: 'default', publicUrl: urlOf(name) },
    postgres: { url: storeUrl, maxPoolSize: 2 },
    lifecycle: { readinessGraceMs: 300 },
    mesh: { host: address(name), port: MESH_PORT, url: `ws://${address(name)}:${MESH_PORT}`, secret: SECRET, discoveryIntervalMs: 500, pingIntervalMs: 500, pongTimeoutMs: 1_500, reconnect: SCHEDULE },
    autoscaler: { enabled: true, intervalMs: 200, sweepIntervalMs: 1_500, maxClockSkewMs: 0 },
  });
}

/** Builds the network, the store (the platform organization, its admin key, `spare` read-only keys) and the three servers, meshed. */
export async function startMultihost(spare: number): Promise<Multihost> {
  buildNetwork({ extra: ['p', 's'] });
  const answers: Answer[] = [];
  const client = startClient(answers);
  const cloudCreates: number[] = [];
  const [store, cloud] = await Promise.all([startPostgres({ netns: ns('p'), listenAddress: address('p') }), startCloud(cloudCreates)]);
  const configFile = path.join(tempDir('fleetplane-multihost-cli-'), 'fleetplane.config.json');
  writeFileSync(configFile, JSON.stringify({ dataDir: path.dirname(configFile), postgres: { url: store.url() } }));
  const init = await fleetplaneIn('a', configFile, ['init', '--json', '--host', PLATFORM_HOST]);
  if (init.status !== 0) throw new Error(`fleetplane init: ${init.stderr}`);
  const adminKey = (JSON.parse(init.stdout) as { key: string }).key;
  const created = await Promise.all(
    Array.from({ length: spare }, (_, index) => fleetplaneIn(names[index % names.length]!, configFile, ['keys', 'create', '--json', '--name', `reader-${index}`, '--permissions', '{"object.read":true}'])),
  );
  const spareKeys = created.map((result) => {
    if (result.status !== 0) throw new Error(`fleetplane keys create: ${result.stderr}`);
    const { key_id: id, key } = JSON.parse(result.stdout) as { key_id: string; key: string };
    return { id, key };
  });
  const ids = new Map(names.map((name) => [name, `${name}-${process.pid}`] as const));
  const started = await Promise.all(names.map((name) => startInNamespace(name, serverConfig(name, ids.get(name)!, store.url()))));
  const servers = new Map(names.map((name, index) => [name, started[index]!] as const));
  const hosts: Multihost = { store, servers, ids, client, answers, adminKey, spareKeys, cloudCreates, stopCloud: cloud.stop };
  await fullMesh(hosts, 30_000);
  await crud(hosts, 'b', { method: 'object.create', collection: 'apis', documents: [{ name: 'fakecloud', baseUrl: cloud.url, endpoints: { create: { method: 'post', path: '/create' }, terminate: { method: 'post', path: '/terminate' } } }] });
  await crud(hosts, 'b', { method: 'object.create', collection: 'clusters', documents: [{ name: 'default', initialDeployment: { cloud: 'fakecloud' }, autoscaler: POLICY }] });
  return hosts;
}

export async function stopMultihost(hosts: Multihost | undefined): Promise<void> {
  if (!hosts) return;
  hosts.client.stop();
  hosts.stopCloud();
  await Promise.all([...hosts.servers.values()].map((server) => server.stop()));
  await hosts.store.stop();
}

export const others = (name: Name) => names.filter((other) => other !== name);

/** Waits until every server is linked to the two others (their primaries' own view). */
export function fullMesh(hosts: Multihost, budgetMs: number): Promise<unknown> {
  return Promise.all(names.map((name) => waitForPeers(hosts.servers.get(name)!, others(name).map((other) => hosts.ids.get(other)!), budgetMs)));
}

const headers = (key: string) => ({ host: PLATFORM_HOST, authorization: `Bearer ${key}`, 'content-type': 'application/json' });

/** An envelope POSTed to `route` of server `to` with `key` (the admin key by default), from the client's namespace. */
export function post(hosts: Multihost, to: Name, route: '/crud' | '/control', body: Record<string, unknown>, options: { key?: string; timeoutMs?: number } = {}): Promise<Answer> {
  return hosts.client.send(to, route, { method: 'POST', headers: headers(options.key ?? hosts.adminKey), body: JSON.stringify(body), timeoutMs: options.timeoutMs });
}

/** `/crud` through `to` with the admin key; anything but 200 is an error. */
export async function crud(hosts: Multihost, to: Name, body: Record<string, unknown>): Promise<unknown> {
  const answer = await post(hosts, to, '/crud', body);
  if (answer.status !== 200) throw new Error(`crud ${String(body.method)} ${String(body.collection)} through ${to}: ${answer.status} ${answer.body ?? answer.error ?? ''}`);
  return JSON.parse(answer.body!);
}

/** The servers whose workers answered `status` sent to every server through `to`'s `/control`. */
export async function answeringThrough(hosts: Multihost, to: Name): Promise<Name[]> {
  const answer = await post(hosts, to, '/control', { method: 'status', broadcast: true });
  if (answer.status !== 200) return [];
  const replies = (JSON.parse(answer.body!) as { replies: Array<{ server: string; ok: boolean }> }).replies;
  return names.filter((name) => replies.some((reply) => reply.ok && reply.server === hosts.ids.get(name)));
}

/** The error code of an answer's body, if any. */
export function codeOf(answer: Answer): string | undefined {
  try {
    return (JSON.parse(answer.body ?? '') as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}
