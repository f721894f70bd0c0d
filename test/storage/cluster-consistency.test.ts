import t from 'tap';
import { assertOneHistory, assertReadYourWrites, entriesAt, type WriteCheck } from './history.js';
import { startStorageServer, type ProcessReport } from './storage-process.js';

t.test('three workers and the primary, each issuing 1,000 concurrent sets and deletes on 20 shared keys: one event sequence everywhere, equal replicas, read-your-writes', async (t) => {
  const server = await startStorageServer(t, { workers: 3 });
  await server.readyWorkers(3);

  const checks = await server.command<WriteCheck[][]>('burst', { ops: 1000, primaryClearEvery: 250 }, 60_000);
  const reports = await server.command<ProcessReport[]>('report', {}, 30_000);

  t.equal(new Set(reports.map((report) => report.pid)).size, 4, 'four processes took part');
  const [primary, ...workers] = reports as [ProcessReport, ...ProcessReport[]];
  t.equal(primary.name, 'primary');
  t.equal(checks.length, 4);
  t.ok(primary.revision > 3_000, `${primary.revision} mutations`);
  t.equal(primary.events.length, primary.revision, 'every revision is an event the primary saw');
  assertOneHistory(
    t,
    reports.map((report) => [report.name, report.events]),
  );
  t.same(primary.entries, entriesAt(primary.events, primary.revision), "the primary's entries are its history replayed");
  for (const worker of workers) {
    t.equal(worker.revision, primary.revision, `${worker.name} reached the final revision`);
    t.same(worker.entries, primary.entries, `${worker.name} holds the primary's entries`);
  }
  t.ok(
    primary.events.some((event) => event.event === 'clear'),
    "the primary's own clears are in the sequence",
  );
  const writers = primary.events.filter((event) => event.event.startsWith('change:')).map((event) => (event.value as { from: string }).from);
  const handovers = writers.filter((writer, index) => index > 0 && writer !== writers[index - 1]).length;
  t.equal(new Set(writers).size, 4, 'every process wrote');
  // Four writers one after another would hand over three times; more means their writes were interleaved.
  t.ok(handovers > 3, `writes of different processes interleaved (${handovers} handovers between consecutive writes)`);
  assertReadYourWrites(t, primary.events, checks.flat());
});

t.test('a worker killed with SIGKILL is replaced by one that starts from a snapshot equal to the primary at its revision, before it serves', async (t) => {
  const server = await startStorageServer(t, { workers: 2 });
  const ready = await server.readyWorkers(2);
  for (let index = 0; index < 20; index++) await server.command('primary', { op: 'set', args: { key: `k${index}`, value: { initial: index } } });
  await server.command('primary', { op: 'startWriting' });

  const victim = ready.find((event) => event.workerId === 1)!;
  process.kill(victim.pid as number, 'SIGKILL');
  const crash = await server.waitFor((event) => event.event === 'worker:crash' && event.pid === victim.pid);
  const replacement = await server.waitFor((event) => event.event === 'worker:ready' && event.workerId === 1, 20_000, server.events.indexOf(crash));
  t.not(replacement.pid, victim.pid);
  await server.command('primary', { op: 'stopWriting' });
  const reports = await server.command<ProcessReport[]>('report', {}, 30_000);

  const primary = reports.find((report) => report.name === 'primary')!;
  const fresh = reports.find((report) => report.pid === replacement.pid)!;
  const survivor = reports.find((report) => report.name === 'worker2')!;
  t.equal(fresh.built.status, 'starting', 'the snapshot was in place when the app was built, before the worker reported ready');
  t.ok(fresh.built.revision >= 20, `the snapshot (revision ${fresh.built.revision}) includes the writes made before the kill`);
  t.same(fresh.built.entries, entriesAt(primary.events, fresh.built.revision), "the snapshot equals the primary's entries at its revision");
  t.ok(primary.revision > fresh.built.revision, 'the primary kept writing while the replacement started');
  t.same(
    fresh.events,
    primary.events.filter((event) => event.revision > fresh.built.revision),
    'after the snapshot, every later event exactly once and none it already held',
  );
  t.same(fresh.entries, primary.entries, "the replacement holds the primary's entries");
  t.same(survivor.events, primary.events, 'the other worker was not disturbed');
});
