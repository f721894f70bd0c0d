import type { Test } from 'tap';
import { budgetText, past, scaled } from '../helpers/wait.js';
import { COOLDOWN_MS, RECONNECT_BOUND_MS, answeringThrough, fullMesh, type Multihost } from './multihost.js';
import { documented, lostWrites, mostPerCooldown, revocation, scaleOuts, statusCounts, type Load, type Sent } from './multihost-load.js';
import { names, type Name } from './netns.js';

// One fault case of the multi-host suite, from the fault to the checks after healing, and the figures it prints.

/** A write on a host cut off from its store answers 503 within this (docs/postgres.md, the defaults). */
export const UNAVAILABLE_BOUND_MS = 10_000;
/** Writes succeed again within this of healing, or of the store's restart. */
export const RECOVERY_BOUND_MS = 30_000;
/** A key revoked through one host is refused on every other within this. */
export const REVOCATION_BOUND_MS = 1_000;
/** A decision's record follows the lease check by a store write: this much earlier than a cooldown is still one per cooldown. */
const RECORD_SLACK_MS = 500;

export interface CaseWindow {
  /** `a`, `b`, ... as the suite names its cases. */
  label: string;
  cutAt: number;
  /** When the fault ended (healed, the store started or thawed). */
  healedAt: number;
  /** Servers whose store was away during the cut: their writes answer 503 in time and succeed again after. */
  storeAway: Name[];
  /** Servers the client could not reach during the cut: what was sent to them then is not counted. */
  unreachable: Name[];
  /** Extra `name=value` figures. */
  extra?: Record<string, string | number | undefined>;
}

/**
 * Holds a fault at least `minMs` from `cutAt`, and until every server of `storeAway` has answered a write with 503
 * (at most the stretched bound and a second): on a slow machine the fault does not end before its effect shows.
 */
export async function holdFault(load: Load, cutAt: number, minMs: number, storeAway: Name[]): Promise<void> {
  await past(cutAt + minMs);
  const refused = (name: Name) => load.sent.some((answer) => answer.to === name && answer.kind === 'write' && answer.status === 503 && answer.endedAt >= cutAt);
  while (Date.now() < cutAt + scaled(UNAVAILABLE_BOUND_MS) + 1_000 && !storeAway.every(refused)) await new Promise((resolve) => setTimeout(resolve, 50));
}

const describe = (answer: Sent) => `${answer.kind} ${answer.to} ${answer.status} ${answer.code ?? answer.error ?? ''} after ${answer.endedAt - answer.startedAt} ms`;
/** A host's writes answered since `cutAt`, as `<sent after the cut>+<took>:<status>` in ms, for a failure's diagnostics. */
const timeline = (load: Load, name: Name, cutAt: number) =>
  load.sent.filter((answer) => answer.to === name && answer.kind === 'write' && answer.endedAt >= cutAt).slice(0, 30).map((answer) => `${answer.startedAt - cutAt}+${answer.endedAt - answer.startedAt}:${answer.status}`).join(' ');

/** A host's warnings and errors around the cut (ms after it, message, error), for a failure's diagnostics. */
function warnings(hosts: Multihost, name: Name, window: CaseWindow): string[] {
  const at = (event: Record<string, unknown>) => Date.parse(String(event.time));
  return hosts.servers
    .get(name)!
    .events.filter((event) => Number(event.level) >= 40 && at(event) >= window.cutAt - 1_000 && at(event) <= window.healedAt + 1_000)
    .slice(0, 20)
    .map((event) => `${at(event) - window.cutAt} ms ${event.component ?? ''} ${event.msg ?? ''} ${(event.err as { message?: string } | undefined)?.message ?? ''}`);
}

const gaps = (times: number[]) => times.slice(1).map((at, index) => at - times[index]!);

/**
 * After healing: writes through each server of `storeAway` (all when the store itself was away) until one is
 * acknowledged, the mesh whole again, `/control` reaching every server from each, a key revoked through
 * `revokeVia` refused elsewhere; then every check and the figures of the case.
 */
export async function checkCase(t: Test, hosts: Multihost, load: Load, window: CaseWindow, revokeVia: Name): Promise<void> {
  const affected = [...new Set([...window.storeAway, ...window.unreachable])];
  await Promise.all(affected.map((name) => load.recovered(name, RECOVERY_BOUND_MS)));
  // The first write acknowledged after healing, whichever loop sent it.
  const recovered = new Map(affected.map((name) => [name, load.sent.find((answer) => answer.to === name && answer.kind === 'write' && answer.status === 200 && answer.endedAt >= window.healedAt)?.endedAt]));
  await fullMesh(hosts, RECONNECT_BOUND_MS + 5_000);
  const linksBackAt = Date.now();
  const throughEach = await Promise.all(names.map((name) => answeringThrough(hosts, name)));
  const revoked = await revocation(hosts, revokeVia);
  const endAt = Date.now();

  const overlapsCut = (answer: Sent) => window.unreachable.includes(answer.to) && answer.endedAt >= window.cutAt && answer.startedAt <= window.healedAt;
  const reachable = load.between(window.cutAt, endAt).filter((answer) => !overlapsCut(answer));
  const acknowledged = reachable.filter((answer) => answer.kind === 'write' && answer.status === 200);
  const lost = await lostWrites(hosts, acknowledged);
  const actions = (await scaleOuts(hosts)).filter((at) => at >= window.cutAt && at < endAt);
  // A write sent just before the cut and refused after it counts: it is the host's answer to its store going away.
  const firstFailure = new Map(window.storeAway.map((name) => [name, load.sent.find((answer) => answer.to === name && answer.kind === 'write' && answer.status === 503 && answer.endedAt >= window.cutAt)]));
  const recoverMs = [...recovered.values()].map((at) => (at === undefined ? Number.POSITIVE_INFINITY : at - window.healedAt));
  const byHost = names.map((name) => `${name}[${statusCounts(reachable.filter((answer) => answer.to === name))}]`).join(';');
  const figures = {
    requests: reachable.length,
    statuses: statusCounts(reachable),
    by_host: byHost,
    acked: acknowledged.length,
    lost: lost.length,
    scale_actions: actions.length,
    scale_per_cooldown: mostPerCooldown(actions, COOLDOWN_MS - RECORD_SLACK_MS),
    first_503_ms: window.storeAway.map((name) => `${name}:${firstFailure.get(name) ? firstFailure.get(name)!.endedAt - window.cutAt : 'none'}`).join(','),
    recover_ms: recoverMs.length > 0 ? Math.max(...recoverMs) : 0,
    links_back_ms: linksBackAt - window.healedAt,
    revoke_ms: [...revoked].map(([name, ms]) => `${name}:${ms ?? 'never'}`).join(','),
    ...window.extra,
  };
  t.comment(`figures case=${window.label} ${Object.entries(figures).map(([name, value]) => `${name}=${value ?? '-'}`).join(' ')}`);

  t.same(reachable.filter((answer) => !documented(answer)).map(describe), [], 'every request to a reachable server was answered with a documented status (probes 200, writes 200 or 503 store_unavailable / store_busy)');
  t.ok(reachable.filter((answer) => answer.kind === 'probe').length > 10, 'probes were sent throughout');
  for (const name of window.storeAway) {
    const first = firstFailure.get(name);
    const seen = { writes: timeline(load, name, window.cutAt), warnings: warnings(hosts, name, window) };
    t.ok(first && first.endedAt - window.cutAt <= scaled(UNAVAILABLE_BOUND_MS), `${name}, its store away: a write answered 503 store_unavailable within ${budgetText(UNAVAILABLE_BOUND_MS)} (${first ? `${first.endedAt - window.cutAt} ms, ${first.code}` : 'none'})`, seen);
    const slow = reachable.filter((answer) => answer.to === name && answer.kind === 'write' && answer.startedAt >= window.cutAt && answer.startedAt < window.healedAt && answer.endedAt - answer.startedAt > scaled(UNAVAILABLE_BOUND_MS));
    t.same(slow.map(describe), [], `${name}: every write sent while its store was away was answered within ${budgetText(UNAVAILABLE_BOUND_MS)}`, seen);
  }
  for (const [name, at] of recovered) t.ok(at !== undefined && at - window.healedAt <= scaled(RECOVERY_BOUND_MS), `${name}: writes succeed again within ${budgetText(RECOVERY_BOUND_MS)} (${at === undefined ? 'never' : `${at - window.healedAt} ms`})`);
  t.same(lost, [], 'every acknowledged write is in PostgreSQL');
  t.ok(acknowledged.length > 0, 'writes were acknowledged');
  for (const gap of gaps(actions)) t.ok(gap >= COOLDOWN_MS - RECORD_SLACK_MS, `scale-outs ${gap} ms apart: at most one per cooldown (${COOLDOWN_MS} ms)`);
  for (const [index, name] of names.entries()) t.same(throughEach[index], names, `links back: /control status through ${name} is answered by every server`);
  for (const [name, ms] of revoked) t.ok(ms !== undefined && ms <= scaled(REVOCATION_BOUND_MS), `a key revoked through ${revokeVia} is refused on ${name} within ${budgetText(REVOCATION_BOUND_MS)} (${ms ?? 'never'} ms)`);
}
