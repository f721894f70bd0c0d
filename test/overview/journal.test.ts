import t from 'tap';
import { EventJournal } from '../../src/overview/journal.js';
import { History } from '../../src/overview/history.js';
import { recordServerEvents, shedEntry, meshLinkEntry, autoscalerEntry } from '../../src/overview/entries.js';
import { SafeEmitter } from '../../src/events/safe-emitter.js';
import type { ServerEmitter } from '../../src/runtime/events.js';

t.test('the journal numbers entries per server, keeps the last ones and answers what came after a number', async (t) => {
  let now = 1_000;
  const journal = new EventJournal('srv-a', () => now, 3);
  const seen: number[] = [];
  journal.onAppend((event) => seen.push(event.seq));
  t.equal(journal.latest, 0, 'nothing yet');
  for (let i = 1; i <= 5; i++) {
    now += 10;
    journal.append({ kind: 'status', worker: i, message: `entry ${i}` });
  }
  t.equal(journal.latest, 5);
  t.same(seen, [1, 2, 3, 4, 5], 'listeners are told of each entry in order');
  t.same(journal.since(0).map((event) => event.seq), [3, 4, 5], 'only the last three are kept');
  t.same(journal.since(3).map((event) => event.seq), [4, 5]);
  t.same(journal.since(5), [], 'nothing after the newest');
  t.same(journal.since(0, 1).map((event) => event.seq), [5], 'a limit keeps the newest');
  t.match(journal.since(4)[0], { server: 'srv-a', seq: 5, at: 1_050, kind: 'status', worker: 5, message: 'entry 5' });
  t.equal(journal.append({ kind: 'shed', message: 'x'.repeat(2_000) }).message.length, 512, 'long messages are cut');
});

t.test('server events become journal entries an operator reads; the rest are left out', async (t) => {
  const events = new SafeEmitter(() => {}) as unknown as ServerEmitter;
  const journal = new EventJournal('srv-a', () => 0);
  recordServerEvents(events, journal);
  events.emitSafe('status_change', { worker: 2, oldStatus: 'ready', newStatus: 'cordoned' });
  events.emitSafe('worker:crash', { workerId: 1, pid: 41, code: null, signal: 'SIGKILL', bootFailure: false });
  events.emitSafe('worker:restart', { workerId: 1, pid: 42, attempt: 1, delayMs: 20 });
  events.emitSafe('worker:health', { workerId: 1, pid: 42, rss: 1, heapUsed: 1, eventLoopLagMs: 1 });
  events.emitSafe('circuit-breaker:tripped', { count: 5, windowMs: 60_000 });
  events.emitSafe('organization.active', { organization_id: 'org-1' });
  t.same(
    journal.since(0).map(({ kind, worker, message }) => ({ kind, worker, message })),
    [
      { kind: 'status', worker: 2, message: 'worker 2: ready → cordoned' },
      { kind: 'crash', worker: 1, message: 'worker 1 (pid 41) crashed: signal SIGKILL' },
      { kind: 'restart', worker: 1, message: 'worker 1 restarted as pid 42 (attempt 1, after 20 ms)' },
      { kind: 'breaker', worker: undefined, message: 'circuit breaker tripped: 5 crashes in 60 s; restarts stopped' },
      { kind: 'organization', worker: undefined, message: 'organization org-1 active' },
    ],
    'heartbeats are not journal entries',
  );
  t.same(shedEntry(new Set(['a', 'b'])), { kind: 'shed', message: 'shedding a, b' });
  t.same(shedEntry(new Set()), { kind: 'shed', message: 'shedding ended' });
  t.same(meshLinkEntry({ peer: 'srv-b', direction: 'out' }, true), { kind: 'mesh', message: 'mesh link to srv-b up (dialed)' });
  t.same(meshLinkEntry({ peer: 'srv-b', direction: 'in', code: 1012, reason: 'restart' }, false), { kind: 'mesh', message: 'mesh link to srv-b down (code 1012: restart)' });
  t.same(autoscalerEntry({ action: 'scale-out', reason: 'cpu' }), { kind: 'autoscaler', message: 'autoscaler: scale-out (cpu)' });
});

t.test('history keeps the last window of samples per subject and answers what came after a time', async (t) => {
  const history = new History(['rss', 'lag'] as const, 1_000);
  history.record('41', 100, { rss: 1, lag: 10 });
  history.record('41', 600, { rss: 2, lag: 20 });
  history.record('42', 700, { rss: 5, lag: 50 });
  t.same(history.since(800), { '41': { at: [100, 600], values: { rss: [1, 2], lag: [10, 20] } }, '42': { at: [700], values: { rss: [5], lag: [50] } } });
  t.same(history.since(800, 600), { '42': { at: [700], values: { rss: [5], lag: [50] } } }, 'only samples after the time given');
  history.record('41', 1_400, { rss: 3, lag: 30 });
  t.same(history.since(1_400)['41'], { at: [600, 1_400], values: { rss: [2, 3], lag: [20, 30] } }, 'samples older than the window are dropped');
  t.same(Object.keys(history.since(1_750)), ['41'], 'a subject whose newest sample left the window is dropped');
});

t.test('a subject that stopped reporting is dropped as others report, with nobody reading the history', async (t) => {
  const history = new History(['rss'] as const, 1_000);
  // Workers replaced one after the other: each pid reports for a while, then never again.
  for (let pid = 1; pid <= 50; pid++) for (let at = pid * 500; at < pid * 500 + 500; at += 50) history.record(String(pid), at, { rss: pid });
  t.ok(history.size <= 4, `only the subjects of the last window and a tenth are kept (${history.size} of 50)`);
  t.same(Object.keys(history.since(25_500)).sort(), ['49', '50'], 'the ones still inside the window');
});
