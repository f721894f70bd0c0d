import { Writable } from 'node:stream';
import { createLogger } from '../../src/logging/logger.js';
import { loadConfig } from '../../src/config/load.js';
import { parseEnvelope, type EnvelopeMeta } from '../../src/ipc/envelope.js';
import { resolveTargets } from '../../src/ipc/targets.js';
import { Mesh } from '../../src/mesh/mesh.js';
import { meshSettings } from '../../src/mesh/settings.js';
import type { PeerTarget } from '../../src/mesh/dialer.js';
import { SECRET } from './helpers.js';
import { until as waitUntil } from '../helpers/wait.js';

export interface InProcessMesh {
  id: string;
  mesh: Mesh;
  url: string;
  /** Log records of this mesh, parsed. */
  logs: Array<Record<string, any>>;
  /** What discovery returns; tests edit it. */
  targets: PeerTarget[];
  routed: Array<{ envelope: unknown; meta: EnvelopeMeta; wantReplies: boolean }>;
  events: Array<{ event: string; [key: string]: any }>;
  organizations: string[];
}

/**
 * A mesh in this process, listening on 127.0.0.1 with a real WebSocket port, whose router is a recorder:
 * envelopes are validated and targeted like the real router does, and answered by "worker 1".
 */
export async function inProcessMesh(id: string, mesh: Record<string, unknown> = {}, cluster = 'unit'): Promise<InProcessMesh> {
  const logs: Array<Record<string, any>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) logs.push(JSON.parse(line));
      done();
    },
  });
  const { config } = loadConfig({ object: { server: { id, cluster }, mesh: { port: 0, host: '127.0.0.1', secret: SECRET, ...mesh } }, env: {} });
  const state: Partial<InProcessMesh> = { id, logs, targets: [], routed: [], events: [], organizations: [] };
  const instance = new Mesh({
    serverId: id,
    cluster,
    config: config.mesh,
    settings: meshSettings(config),
    log: createLogger({ level: 'debug', destination }),
    route: async (envelope, options) => {
      const valid = parseEnvelope(envelope);
      resolveTargets(valid, { serverId: id, cluster, workers: [1], serves: () => true }, options.fromPeer);
      state.routed!.push({ envelope, meta: options.meta, wantReplies: options.wantReplies });
      return { id: options.meta.id, replies: [{ server: id, worker: 1, ok: true, result: valid.data ?? null }], missing: [] };
    },
    organizations: () => state.organizations!,
    publicUrl: () => `http://${id}.example.test`,
    advertisedUrl: (port) => `${config.mesh.tls.key ? 'wss' : 'ws'}://127.0.0.1:${port}`,
    discover: async () => state.targets!,
  });
  for (const event of ['link:open', 'link:close', 'reconnect', 'giveup', 'refused'] as const) instance.on(event, (payload) => state.events!.push({ event, ...payload }));
  const port = await instance.listen();
  state.mesh = instance;
  state.url = instance.url!;
  if (!port) throw new Error('the mesh did not listen');
  return state as InProcessMesh;
}

/** Waits until `check` holds (a budget as in helpers/wait.ts). */
export async function until(check: () => boolean, what: string, budgetMs = 10_000): Promise<void> {
  await waitUntil(what, () => (check() ? true : undefined), budgetMs);
}

/** `low` dials `high`: the larger id dials the smaller one. */
export function point(from: InProcessMesh, to: InProcessMesh, startedAt = 'first'): void {
  from.targets.splice(0, from.targets.length, { id: to.id, url: to.url, startedAt });
}
