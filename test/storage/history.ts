import type { Test } from 'tap';
import type { JsonValue } from '../../src/storage/json-value.js';

/** One SPEC 4.1 event as a process saw it. */
export interface EventRecord {
  revision: number;
  event: string;
  value?: JsonValue;
  oldValue?: JsonValue;
}

/** A `set` and the read of the same key made in the same process as soon as the set resolved. */
export interface WriteCheck {
  key: string;
  value: JsonValue;
  revision: number;
  /** The process's storage revision at the read. */
  revisionAtRead: number;
  observed: JsonValue | null | undefined;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
const touches = (event: EventRecord, key: string) => event.event === `change:${key}` || event.event === `delete:${key}` || event.event === 'clear';

/** The value of `key` once every event up to `revision` is applied (events in revision order). */
export function valueAt(history: EventRecord[], key: string, revision: number): JsonValue | undefined {
  let value: JsonValue | undefined;
  for (const event of history) {
    if (event.revision > revision) break;
    if (event.event === `change:${key}`) value = event.value;
    else if (touches(event, key)) value = undefined;
  }
  return value;
}

/** Entries (sorted by key) once every event up to `revision` is applied. */
export function entriesAt(history: EventRecord[], revision: number): Array<[string, JsonValue]> {
  const entries = new Map<string, JsonValue>();
  for (const event of history) {
    if (event.revision > revision) break;
    const [kind, key] = [event.event.slice(0, event.event.indexOf(':')), event.event.slice(event.event.indexOf(':') + 1)];
    if (event.event === 'clear') entries.clear();
    else if (kind === 'change') entries.set(key, event.value!);
    else entries.delete(key);
  }
  return [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The primary's history has one event per revision 1..n, and every other process saw exactly that sequence. */
export function assertOneHistory(t: Test, histories: Array<[name: string, history: EventRecord[]]>): void {
  const [[, primary]] = histories as [[string, EventRecord[]]];
  t.same(
    primary.map((event) => event.revision),
    Array.from({ length: primary.length }, (_, index) => index + 1),
    `the primary's ${primary.length} events: one per revision, in order, none missing or repeated`,
  );
  for (const [name, history] of histories.slice(1)) t.same(history, primary, `${name} saw the primary's event sequence`);
}

/**
 * Read-your-writes, checked against the history rather than assumed: the revision a `set` resolved with is
 * that very write; the read right after it happened at that revision or later; what it returned is the
 * key's value at the revision read; and when nobody touched the key in between, that is the written value.
 */
export function assertReadYourWrites(t: Test, history: EventRecord[], checks: WriteCheck[]): void {
  let untouched = 0;
  let failures = 0;
  const fail = (message: string) => {
    if (failures++ < 10) t.fail(message);
  };
  for (const check of checks) {
    const own = history[check.revision - 1];
    if (own?.revision !== check.revision || own.event !== `change:${check.key}` || !same(own.value, check.value)) {
      fail(`revision ${check.revision} is not the write of ${JSON.stringify(check.value)} to ${check.key}`);
      continue;
    }
    if (check.revisionAtRead < check.revision) fail(`the read after writing ${check.key} at ${check.revision} was at revision ${check.revisionAtRead}`);
    if (!same(check.observed, valueAt(history, check.key, check.revisionAtRead))) fail(`the read of ${check.key} at ${check.revisionAtRead} is not that revision's value`);
    if (!history.slice(check.revision, check.revisionAtRead).some((event) => touches(event, check.key))) {
      untouched++;
      if (!same(check.observed, check.value)) fail(`own write to ${check.key} at ${check.revision} not visible right after it resolved`);
    }
  }
  t.equal(failures, 0, `read-your-writes held for all ${checks.length} writes`);
  t.ok(untouched > 0, `${untouched} of them were read back before another write touched the key`);
}
