import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { ServerSampler, procReader } from '../../src/autoscaler/signals.js';
import { SCALE, until } from '../helpers/wait.js';
import { own } from '../helpers/processes.js';

t.test('CPU is the time used by every process of the server over the interval, per CPU it may use', async (t) => {
  let at = 1_000;
  const readings = new Map([
    [10, { cpuUs: 1_000_000, rssBytes: 100 }],
    [11, { cpuUs: 2_000_000, rssBytes: 300 }],
  ]);
  const sampler = new ServerSampler({ read: (pid) => readings.get(pid), now: () => at, cpus: 2, memoryBytes: 1_000 });
  t.equal(sampler.sample([10, 11]), undefined, 'the first sample only sets the starting point');
  at += 1_000;
  readings.set(10, { cpuUs: 1_500_000, rssBytes: 100 });
  readings.set(11, { cpuUs: 2_500_000, rssBytes: 300 });
  // 1 s of CPU in 1 s of wall time on 2 CPUs: 50%; 400 of 1,000 bytes: 40%.
  t.same(sampler.sample([10, 11]), { at: 2_000, cpu: 50, memory: 40 });
  at += 1_000;
  readings.delete(11);
  readings.set(12, { cpuUs: 200_000, rssBytes: 100 });
  readings.set(10, { cpuUs: 1_700_000, rssBytes: 100 });
  // Worker 11 is gone; 12 is new (ready since the previous sample): its boot is no load, it counts from here.
  t.same(sampler.sample([10, 11, 12]), { at: 3_000, cpu: 10, memory: 20 });
  at += 1_000;
  readings.set(12, { cpuUs: 600_000, rssBytes: 100 });
  readings.set(10, { cpuUs: 1_900_000, rssBytes: 100 });
  // 0.2 s + 0.4 s on 2 CPUs.
  t.same(sampler.sample([10, 12]), { at: 4_000, cpu: 30, memory: 20 });
});

t.test('no readable process: no sample (missing signals, never a zero load)', async (t) => {
  let at = 0;
  const sampler = new ServerSampler({ read: () => undefined, now: () => (at += 1_000), cpus: 1, memoryBytes: 1 });
  t.equal(sampler.sample([1]), undefined);
  t.equal(sampler.sample([1]), undefined);
});

t.test('real processes: a busy one reads higher CPU than an idle one, both with resident memory', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const busy = own(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }), { group: false });
  const idle = own(spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }), { group: false });
  t.teardown(() => {
    busy.kill('SIGKILL');
    idle.kill('SIGKILL');
  });
  await Promise.all([once(busy, 'spawn'), once(idle, 'spawn')]);
  const busySampler = new ServerSampler({ cpus: 1 });
  const idleSampler = new ServerSampler({ cpus: 1 });
  busySampler.sample([busy.pid!]);
  idleSampler.sample([idle.pid!]);
  // Poll until the busy process has used clearly more CPU than the idle one. On a machine loaded `SCALE` times
  // over its CPUs, a process gets about 1/SCALE of a CPU: "clearly" is 10 points of that share.
  const clearly = 10 / SCALE;
  let busyLoad = 0;
  let idleLoad = 0;
  await until('the busy process to read clearly above the idle one', async () => {
    await delay(100);
    busyLoad = busySampler.sample([busy.pid!])?.cpu ?? 0;
    idleLoad = idleSampler.sample([idle.pid!])?.cpu ?? 0;
    return busyLoad > clearly && busyLoad > idleLoad + clearly ? true : undefined;
  }, 10_000, { everyMs: 0 }).catch(() => undefined);
  t.ok(busyLoad > idleLoad + clearly, `busy ${busyLoad.toFixed(1)}% vs idle ${idleLoad.toFixed(1)}% (clearly: ${clearly.toFixed(1)} points)`);
  t.ok(procReader(idle.pid!)!.rssBytes > 1024 * 1024, 'a Node process has more than 1 MiB resident');
  busy.kill('SIGKILL');
  await once(busy, 'exit');
  t.equal(procReader(busy.pid!), undefined, 'a process gone reads as undefined');
});
