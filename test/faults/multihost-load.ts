import { scaled } from '../helpers/wait.js';
import { codeOf, post, type Key, type Multihost } from './multihost.js';
import { names, type Answer, type Name } from './netns.js';

// What the multi-host fault tests send and how they read it: a writer per server through /crud (every
// acknowledged document must be in PostgreSQL afterwards), a probe per server, revocations timed across hosts, the
// autoscaler's actions read from the inventory.

export interface Sent extends Answer {
  kind: 'write' | 'probe';
  code?: string;
  seq?: number;
}

/** The statuses a reachable server may answer with while its store is away: a probe 200, a write 200 or 503 (docs/postgres.md). */
export const documented = (answer: Sent) => answer.status === 200 || (answer.kind === 'write' && answer.status === 503 && (answer.code === 'store_unavailable' || answer.code === 'store_busy'));

/** A write's answer may take this long (the client gives up later, so a slower answer is measured, not cut short). */
const WRITE_TIMEOUT_MS = 30_000;

export class Load {
  readonly sent: Sent[] = [];
  private readonly next = new Map<Name, number>(names.map((name) => [name, 0]));
  private running = true;
  private readonly loops: Array<Promise<void>> = [];

  constructor(private readonly hosts: Multihost) {}

  /** One document `{ writer, seq }` written through `to`; answered with how it went. */
  async write(to: Name): Promise<Sent> {
    const seq = this.next.get(to)!;
    this.next.set(to, seq + 1);
    const body = { method: 'object.create', collection: 'acks', documents: [{ writer: to, seq }] };
    const answer = await post(this.hosts, to, '/crud', body, { timeoutMs: scaled(WRITE_TIMEOUT_MS) });
    const sent: Sent = { ...answer, kind: 'write', seq, code: codeOf(answer) };
    this.sent.push(sent);
    return sent;
  }

  /** A writer and a prober per server, each sending its next request once the previous one is answered. */
  start(): this {
    for (const name of names) {
      this.loops.push(this.loop(() => this.write(name), 20));
      this.loops.push(
        this.loop(async () => {
          const answer = await this.hosts.client.send(name, '/healthz', { method: 'GET', timeoutMs: 5_000 });
          this.sent.push({ ...answer, kind: 'probe' });
        }, 100),
      );
    }
    return this;
  }

  private async loop(step: () => Promise<unknown>, pauseMs: number): Promise<void> {
    while (this.running) {
      await step();
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }

  /** Stops sending; resolves once every request has its answer. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** Writes through `to` until one is acknowledged, for at most `budgetMs` (stretched). */
  async recovered(to: Name, budgetMs: number): Promise<void> {
    const deadline = Date.now() + scaled(budgetMs);
    while (Date.now() < deadline) {
      if ((await this.write(to)).status === 200) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** What was sent to `to` (any server when absent) from `from` to `until`. */
  between(from: number, until: number, to?: Name): Sent[] {
    return this.sent.filter((answer) => answer.startedAt >= from && answer.startedAt < until && (to === undefined || answer.to === to));
  }

  acknowledged(): Sent[] {
    return this.sent.filter((answer) => answer.kind === 'write' && answer.status === 200);
  }
}

/** The acknowledged writes (`writer:seq`) that PostgreSQL does not hold. */
export async function lostWrites(hosts: Multihost, acknowledged: Sent[]): Promise<string[]> {
  const { rows } = await hosts.store.query("SELECT doc->>'writer' AS writer, doc->>'seq' AS seq FROM fleetplane_documents WHERE collection = 'acks'");
  const stored = new Set(rows.map((row: { writer: string; seq: string }) => `${row.writer}:${row.seq}`));
  return acknowledged.map((answer) => `${answer.to}:${answer.seq}`).filter((id) => !stored.has(id));
}

/** When each scale-out the autoscaler recorded in the inventory was created (records of servers that are not ours). */
export async function scaleOuts(hosts: Multihost): Promise<number[]> {
  const ours = [...hosts.ids.values()];
  const { rows } = await hosts.store.query("SELECT doc->'master'->>'createdAt' AS created FROM fleetplane_documents WHERE collection = 'servers' AND doc->>'cluster_id' = 'default' AND NOT (id = ANY($1::text[]))", [ours]);
  return rows
    .map((row: { created: string | null }) => Date.parse(row.created ?? ''))
    .filter(Number.isFinite)
    .sort((a: number, b: number) => a - b);
}

/** The most actions in any one cooldown. */
export function mostPerCooldown(times: number[], cooldownMs: number): number {
  let most = 0;
  for (const [index, at] of times.entries()) most = Math.max(most, times.slice(index).filter((other) => other < at + cooldownMs).length);
  return most;
}

/** The lease's holder, as stored. */
export async function leaseHolder(hosts: Multihost): Promise<Name | undefined> {
  const { rows } = await hosts.store.query("SELECT doc->>'owner' AS owner FROM fleetplane_documents WHERE collection = 'fleetplane_leases' AND id = 'decider:default'");
  return names.find((name) => hosts.ids.get(name) === rows[0]?.owner);
}

export const read = (hosts: Multihost, to: Name, key: Key) => post(hosts, to, '/crud', { method: 'object.read', collection: 'acks', limit: 1 }, { key: key.key });

/**
 * Reads with `key` through `to` until refused as revoked; answers when, or undefined past `budgetMs` (stretched).
 * A 503 (the server's store away) is not an answer about the key.
 */
export async function refusedAt(hosts: Multihost, to: Name, key: Key, budgetMs: number): Promise<number | undefined> {
  const deadline = Date.now() + scaled(budgetMs);
  while (Date.now() < deadline) {
    const answer = await read(hosts, to, key);
    if (answer.status === 403 && codeOf(answer) === 'key_revoked') return answer.endedAt;
    if (answer.status !== 200 && answer.status !== 503) throw new Error(`a read with the key through ${to} answered ${answer.status} ${answer.body ?? answer.error ?? ''}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return undefined;
}

/** Revokes `key` through `via`'s `/crud` with the admin key. */
export const revoke = (hosts: Multihost, via: Name, key: Key) => post(hosts, via, '/crud', { method: 'object.update', collection: 'keys', filter: { _id: key.id }, update: { $set: { disabled: true } } });

/** An unused key of `startMultihost`'s spares. */
export function takeKey(hosts: Multihost): Key {
  const key = hosts.spareKeys.shift();
  if (!key) throw new Error('no unused key left: create more in startMultihost');
  return key;
}

/**
 * Takes an unused key, checks it is accepted through every server in `on` (so each has it cached), revokes it
 * through `via`'s API and answers how long after the acknowledgement each server of `on` refused it.
 */
export async function revocation(hosts: Multihost, via: Name, on: Name[] = names.filter((name) => name !== via)): Promise<Map<Name, number | undefined>> {
  const key = takeKey(hosts);
  for (const name of on) {
    const answer = await read(hosts, name, key);
    if (answer.status !== 200) throw new Error(`the key is not accepted through ${name} before its revocation: ${answer.status} ${answer.body ?? answer.error ?? ''}`);
  }
  const revoked = await revoke(hosts, via, key);
  if (revoked.status !== 200) throw new Error(`revoking through ${via}: ${revoked.status} ${revoked.body ?? revoked.error ?? ''}`);
  const after = new Map<Name, number | undefined>();
  await Promise.all(
    on.map(async (name) => {
      const at = await refusedAt(hosts, name, key, 5_000);
      after.set(name, at === undefined ? undefined : at - revoked.endedAt);
    }),
  );
  return after;
}

/** `200:812,503:40` */
export function statusCounts(list: Sent[]): string {
  const counts = new Map<string, number>();
  for (const answer of list) {
    const label = answer.status === 503 ? `503/${answer.code ?? '?'}` : String(answer.status);
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
  return [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([label, count]) => `${label}:${count}`).join(',') || 'none';
}
