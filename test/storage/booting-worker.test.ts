import t from 'tap';
import { startStorageServer, type ProcessReport } from './storage-process.js';

t.test('a value set and a shed list changed while a worker boots reach it before it is ready, without it asking', async (t) => {
  const server = await startStorageServer(t, { workers: 1 });
  const [first] = await server.readyWorkers(1);
  await server.command('primary', { op: 'set', args: { key: 'early', value: 'before' } });
  await server.command('primary', { op: 'shed', args: { organizations: ['org-before'] } });

  process.kill(first!.pid as number, 'SIGKILL');
  const crash = await server.waitFor((event) => event.event === 'worker:crash' && event.pid === first!.pid);
  // The replacement is forked and boots while the primary keeps changing both.
  await server.command('primary', { op: 'startWriting' });
  await server.command('primary', { op: 'set', args: { key: 'late', value: 'while booting' } });
  await server.command('primary', { op: 'shed', args: { organizations: ['org-while-booting'] } });
  const replacement = await server.waitFor((event) => event.event === 'worker:ready' && event.workerId === 1, 20_000, server.events.indexOf(crash));
  await server.command('primary', { op: 'stopWriting' });

  const boot = await server.command<{ shedding: string[]; askedBeforeReady: unknown[] }>('worker', { worker: 1, op: 'boot' });
  t.same(boot.askedBeforeReady, [], 'the worker asked the primary for nothing on the storage or state channels before it was ready');
  t.same(boot.shedding, ['org-while-booting'], 'the shed list changed while it booted is the one it holds');
  const reports = await server.command<ProcessReport[]>('report', {}, 30_000);
  const primary = reports.find((report) => report.name === 'primary')!;
  const fresh = reports.find((report) => report.pid === replacement.pid)!;
  t.equal(fresh.built.status, 'starting', 'the app was built before the worker reported ready');
  t.ok(fresh.built.entries.some(([key, value]) => key === 'early' && value === 'before'), 'the value set before it was forked was in its storage when the app was built');
  t.same(fresh.entries, primary.entries, "it holds the primary's entries");
  t.ok(fresh.entries.some(([key, value]) => key === 'late' && value === 'while booting'), 'the value set while it booted included');
  t.same(fresh.events, primary.events.filter((event) => event.revision > fresh.built.revision), 'every change after its snapshot, exactly once');
});
