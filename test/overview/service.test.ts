import t from 'tap';
import { Value } from '@sinclair/typebox/value';
import { FakeClock } from '../helpers/fake-clock.js';
import { SafeEmitter } from '../../src/events/safe-emitter.js';
import type { ServerEmitter } from '../../src/runtime/events.js';
import { EventJournal } from '../../src/overview/journal.js';
import { ServerOverview, type FleetReport } from '../../src/overview/service.js';
import { ServerSummarySchema, type WorkerFigures } from '../../src/overview/schema.js';

function harness() {
  const clock = new FakeClock(10_000);
  const events = new SafeEmitter(() => {}) as unknown as ServerEmitter;
  const fleet: FleetReport = {
    target: 2,
    active: 2,
    quarantined: 0,
    restartsPending: 0,
    breaker: { count: 0, tripped: false },
    workers: [
      { worker: 1, pid: 101, status: 'ready', retiring: null, uptimeMs: 5_000, rss: 50e6, heapUsed: 20e6, eventLoopLagMs: 1.234 },
      { worker: 2, pid: 102, status: 'cordoned', retiring: null, uptimeMs: 5_000, rss: 60e6, heapUsed: 25e6, eventLoopLagMs: null },
    ],
  };
  let figures: WorkerFigures[] = [
    { worker: 1, pid: 101, status: 'ready', uptimeMs: 5_000, connections: 3, requests: 100 },
    { worker: 2, pid: 102, status: 'cordoned', uptimeMs: 5_000, connections: 1, requests: 50 },
  ];
  const overview = new ServerOverview({
    serverId: 'srv-a',
    cluster: 'main',
    host: 'host-a',
    version: '1.2.3',
    clock,
    startedAt: 4_000,
    status: () => 'ready',
    ready: () => true,
    fleet: () => fleet,
    primaryRssBytes: () => 40e6,
    gatherWorkers: async () => figures,
    shed: () => new Set(['org-z', 'org-b']),
    organizations: () => [{ organization_id: 'org-b', workers: [1], sockets: 2 }],
    journal: new EventJournal('srv-a', () => clock.now()),
  });
  overview.observe(events);
  return { clock, events, fleet, overview, setFigures: (next: WorkerFigures[]) => (figures = next) };
}

t.test('the summary adds up the workers and reads as the cluster view expects', async (t) => {
  const { overview } = harness();
  const summary = await overview.snapshot({ processes: false });
  t.ok(Value.Check(ServerSummarySchema, summary), 'matches the schema peers are checked against');
  t.match(summary, {
    server: 'srv-a', cluster: 'main', host: 'host-a', version: '1.2.3', status: 'ready', ready: true, uptimeMs: 6_000,
    workers: { target: 2, active: 2, cordoned: 1, quarantined: 0, breaker: { tripped: false } },
    connections: 4, requestsPerSecond: 0, rssBytes: 150e6, shed: ['org-b', 'org-z'],
    organizations: [{ organization_id: 'org-b', workers: [1], sockets: 2 }], autoscaler: null,
  });
  t.notOk('processes' in summary, 'no process list when not asked');
});

t.test('restarts, crashes and quarantine are kept per slot; request rates come from two reads', async (t) => {
  const { clock, events, overview, setFigures } = harness();
  events.emitSafe('worker:crash', { workerId: 1, pid: 99, code: null, signal: 'SIGKILL', bootFailure: false });
  events.emitSafe('worker:restart', { workerId: 1, pid: 101, attempt: 1, delayMs: 20 });
  events.emitSafe('worker:quarantined', { workerId: 2, consecutiveBootFailures: 3 });
  await overview.snapshot();
  clock.advance(2_000);
  setFigures([
    { worker: 1, pid: 101, status: 'ready', uptimeMs: 7_000, connections: 3, requests: 300 },
    { worker: 2, pid: 102, status: 'cordoned', uptimeMs: 7_000, connections: 0, requests: 50 },
  ]);
  const snapshot = await overview.snapshot();
  t.match(snapshot.processes, [
    { worker: 1, pid: 101, restarts: 1, quarantined: false, lastCrash: { at: 10_000, pid: 99, exit: 'signal SIGKILL' }, requestsPerSecond: 100, connections: 3, eventLoopLagMs: 1.2 },
    { worker: 2, pid: 102, restarts: 0, quarantined: true, lastCrash: null, requestsPerSecond: 0, connections: 0 },
  ]);
  t.equal(snapshot.requestsPerSecond, 100, 'the server rate is the sum of its workers');
  clock.advance(200);
  t.equal((await overview.snapshot()).requestsPerSecond, 100, 'a read too close to the last keeps the last rate');
  events.emitSafe('worker:ready', { workerId: 2, pid: 103 });
  t.equal((await overview.snapshot()).processes![1]!.quarantined, false, 'a ready worker leaves quarantine');
});

t.test('heartbeats make the last ten minutes of each process; asked with historySince only', async (t) => {
  const { clock, events, overview } = harness();
  events.emitSafe('worker:health', { workerId: 1, pid: 101, rss: 50e6, heapUsed: 20e6, eventLoopLagMs: 1.26 });
  clock.advance(5_000);
  events.emitSafe('worker:health', { workerId: 1, pid: 101, rss: 51e6, heapUsed: 21e6, eventLoopLagMs: 2 });
  t.notOk('history' in (await overview.snapshot()), 'no history unless asked');
  const full = await overview.snapshot({ historySince: 0 });
  t.same(full.history!['101'], { at: [10_000, 15_000], values: { rssBytes: [50e6, 51e6], heapUsedBytes: [20e6, 21e6], eventLoopLagMs: [1.3, 2] } });
  t.same(full.history!.server!.at, [15_000], "the server's own figures are sampled when asked");
  const later = await overview.snapshot({ historySince: 12_000 });
  t.same(later.history!['101']!.at, [15_000], 'only what came after');
  clock.advance(11 * 60_000);
  t.notOk('101' in (await overview.snapshot({ historySince: 0 })).history!, 'samples older than ten minutes are gone');
});
