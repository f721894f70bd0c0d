import { IpcError, asList, type IpcEnvelope } from './envelope.js';

/** What the router knows of this server when it resolves targets. */
export interface TargetView {
  serverId: string;
  cluster: string;
  /** Workers that take envelopes (started and not retiring), numbers ascending. */
  workers: readonly number[];
  /** Whether a worker currently serves an organization (asked only for organization-scoped envelopes). */
  serves(workerId: number, organizationId: string): boolean;
  /** Single-process mode: the primary is also worker 0. */
  singleProcess?: boolean;
  /** Every worker this server has, taking envelopes or not (starting, restarting, retiring); default `workers`. */
  existing?: readonly number[];
}

/** Where an envelope goes: processes of this server, and whether (and to whom) it is forwarded to peers. */
export interface TargetPlan {
  master: boolean;
  workers: number[];
  forward: { servers?: string[]; clusters?: string[]; all?: boolean; organization_id?: string } | undefined;
  /** Workers named explicitly that this server does not have (or that take no envelopes now): reported missing. */
  absent?: number[];
  /** Of `absent`, those this server does not have at all (not one starting or restarting): no such worker. */
  unknown?: number[];
}

const TARGET_FIELDS = ['server', 'cluster', 'worker', 'master', 'broadcast', 'organization_id'] as const;

/**
 * Methods that act on a whole server, whichever of its processes receives them, and so take no `worker` target:
 * the primary hands each connection to a worker before the request names its organization, so one worker
 * cannot stop serving one organization while the others serve it (SPEC 3.4).
 */
const SERVER_WIDE: Readonly<Record<string, string>> = {
  shed: 'shed applies to the whole server: use master: true or server: <id>, not worker',
};

/**
 * SPEC 5.2 targeting, as a pure function. Servers are selected by `server` / `cluster` (default: this one);
 * within a selected server an explicit `worker` list wins over `broadcast`, `organization_id` scopes to the
 * workers serving it, and `master` adds the primary. Naming a server and nothing inside it addresses its
 * primary. An envelope that arrived from a peer (`fromPeer`) is never forwarded again.
 */
export function resolveTargets(envelope: IpcEnvelope, view: TargetView, fromPeer = false): TargetPlan {
  if (!TARGET_FIELDS.some((field) => envelope[field] !== undefined && envelope[field] !== false)) {
    throw new IpcError('no_target', 'the envelope names no target (server, cluster, worker, master, broadcast or organization_id)');
  }
  if (envelope.worker !== undefined && Object.hasOwn(SERVER_WIDE, envelope.method)) throw new IpcError('invalid_target', SERVER_WIDE[envelope.method]!, 'worker');
  const servers = asList(envelope.server);
  const clusters = asList(envelope.cluster);
  const selected = servers ? servers.includes(view.serverId) : clusters ? clusters.includes(view.cluster) : true;

  let forward: TargetPlan['forward'];
  if (!fromPeer) {
    if (servers) {
      const others = servers.filter((id) => id !== view.serverId);
      if (others.length > 0) forward = { servers: others };
    } else if (clusters) {
      forward = { clusters };
    } else if (envelope.broadcast || envelope.organization_id !== undefined) {
      forward = { all: true, organization_id: envelope.organization_id };
    }
  }
  if (!selected) return { master: false, workers: [], forward };

  const explicit = asList(envelope.worker);
  const org = envelope.organization_id;
  let workers: number[];
  let absent: number[] = [];
  if (explicit) {
    const named = [...new Set(explicit)];
    workers = named.filter((id) => view.workers.includes(id));
    absent = named.filter((id) => !view.workers.includes(id) && !(view.singleProcess && id === 0));
  } else if (envelope.broadcast || org !== undefined) {
    workers = org === undefined ? [...view.workers] : view.workers.filter((id) => view.serves(id, org));
  } else {
    workers = [];
  }
  const namesInside = explicit !== undefined || envelope.broadcast || org !== undefined || envelope.master;
  const master = Boolean(envelope.master) || (!namesInside && (servers !== undefined || clusters !== undefined));
  // One process is both primary and worker 0: it is one target, delivered once.
  if (view.singleProcess && master) workers = workers.filter((id) => id !== 0);
  const existing = view.existing ?? view.workers;
  const unknown = absent.filter((id) => !existing.includes(id));
  return {
    master, workers: workers.sort((a, b) => a - b), forward,
    ...(absent.length > 0 ? { absent: absent.sort((a, b) => a - b) } : {}),
    ...(unknown.length > 0 ? { unknown: unknown.sort((a, b) => a - b) } : {}),
  };
}

/** Why a worker named by number is missing when this server has no such worker, listing the ones it has. */
export function noSuchWorker(worker: number, view: TargetView): string {
  const existing = [...(view.existing ?? view.workers)].sort((a, b) => a - b);
  if (view.singleProcess) return `no such worker: ${worker} (this server runs in a single process: worker 0)`;
  if (existing.length === 0) return `no such worker: ${worker} (this server has no worker now)`;
  return `no such worker: ${worker} (this server has worker${existing.length === 1 ? '' : 's'} ${existing.join(', ')})`;
}

