import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { FAST, ServerProcess, tempDir } from '../helpers/server-process.js';
import { budgetText, scaled } from '../helpers/wait.js';

export const MESH_FIXTURE = path.resolve(import.meta.dirname, '..', 'fixtures', 'mesh-server.mjs');
export const SECRET = 'test-mesh-secret-0123456789abcdef';

export interface Reply { server: string; worker: number; ok: boolean; result?: any; error?: { code: string; message: string } }
export interface Result { id: string; replies: Reply[]; missing: Array<{ server: string; worker?: number }> }
export interface Peer { server: string; direction: 'in' | 'out'; publicUrl?: string; organizations: string[] }

/** Config of one server of a test mesh: its own id, ports and data directory; the store file is shared. */
export function meshConfig(id: string, dbPath: string, overrides: Record<string, any> = {}): Record<string, any> {
  return {
    ...FAST,
    dataDir: tempDir('fleetplane-mesh-'),
    db: { path: dbPath },
    server: { id, cluster: 'mesh-test' },
    http: { port: 0, host: '127.0.0.1' },
    workers: 2,
    ...overrides,
    // A peer starved of CPU answers its pings late: only a much later silence is a dead link.
    mesh: { port: 0, host: '127.0.0.1', secret: SECRET, discoveryIntervalMs: 60_000, pingIntervalMs: 2_000, pongTimeoutMs: scaled(5_000), ...overrides.mesh },
  };
}

/** A fresh shared store file and ids that sort in the order given (the larger id dials the smaller). */
export function meshIds(...names: string[]): { dbPath: string; ids: string[] } {
  const run = randomBytes(3).toString('hex');
  return { dbPath: path.join(tempDir('fleetplane-meshdb-'), 'shared.db'), ids: names.map((name) => `${name}-${run}`) };
}

export async function startMeshServer(config: Record<string, unknown>): Promise<ServerProcess> {
  const server = ServerProcess.spawn(MESH_FIXTURE, config);
  await server.started(30_000);
  return server;
}

export const idOf = (server: ServerProcess) => server.events.find((event) => event.event === 'started')!.id as string;

/** Waits until the server's linked peers are exactly `expected` (ids); returns them. */
export async function waitForPeers(server: ServerProcess, expected: string[], budgetMs = 30_000): Promise<Peer[]> {
  const deadline = Date.now() + scaled(budgetMs);
  const want = [...expected].sort().join(',');
  let peers: Peer[] = [];
  while (Date.now() < deadline) {
    peers = await server.command<Peer[]>('mesh.peers');
    if (peers.map((peer) => peer.server).join(',') === want) return peers;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${idOf(server)}: peers ${JSON.stringify(peers)} after ${budgetText(budgetMs)}, expected ${want}`);
}

/** Waits until `check` holds for the server's peers. */
export async function waitForPeerState(server: ServerProcess, check: (peers: Peer[]) => boolean, budgetMs = 15_000): Promise<Peer[]> {
  const deadline = Date.now() + scaled(budgetMs);
  let peers: Peer[] = [];
  while (Date.now() < deadline) {
    peers = await server.command<Peer[]>('mesh.peers');
    if (check(peers)) return peers;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${idOf(server)}: peer state ${String(check).slice(0, 200)} not reached within ${budgetText(budgetMs)}; peers ${JSON.stringify(peers)}`);
}

/** How many times each process of the mesh (`<server>/primary`, `<server>/worker N`) received message `id`. */
export async function deliveries(from: ServerProcess, id: string): Promise<Map<string, number>> {
  const counts = await from.command<Result>('request', { envelope: { method: 'probe.count', master: true, broadcast: true, data: { id } } });
  if (counts.missing.length > 0) throw new Error(`processes did not answer the count: ${JSON.stringify(counts.missing)}`);
  return new Map(counts.replies.map((reply) => [`${reply.result.server}/${reply.result.primary ? 'primary' : `worker ${reply.result.worker}`}`, reply.result.count]));
}
