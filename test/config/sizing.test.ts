import t from 'tap';
import { cgroupCpuLimit, resolveWorkerCount } from '../../src/config/sizing.js';

/** A file reader over a fixed set of files; records what was read, throws ENOENT for anything else. */
function files(contents: Record<string, string>) {
  const read: string[] = [];
  const reader = (file: string) => {
    read.push(file);
    const content = contents[file];
    if (content === undefined) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
    return content;
  };
  return { reader, read };
}

const V2 = '/sys/fs/cgroup/cpu.max';
const V1_QUOTA = '/sys/fs/cgroup/cpu/cpu.cfs_quota_us';
const V1_PERIOD = '/sys/fs/cgroup/cpu/cpu.cfs_period_us';

t.test('cgroupCpuLimit', async (t) => {
  t.test('v2 "max" means no limit, without looking at v1', async (t) => {
    const { reader, read } = files({ [V2]: 'max 100000\n', [V1_QUOTA]: '50000', [V1_PERIOD]: '100000' });
    t.equal(cgroupCpuLimit(reader), undefined);
    t.same(read, [V2]);
  });

  t.test('v2 quota and period give a fractional CPU count', async (t) => {
    t.equal(cgroupCpuLimit(files({ [V2]: '150000 100000\n' }).reader), 1.5);
    t.equal(cgroupCpuLimit(files({ [V2]: '400000 100000' }).reader), 4);
  });

  t.test('without cgroup v2 the v1 quota and period are used', async (t) => {
    const { reader, read } = files({ [V1_QUOTA]: '50000\n', [V1_PERIOD]: '100000\n' });
    t.equal(cgroupCpuLimit(reader), 0.5);
    t.same(read, [V2, V1_QUOTA, V1_PERIOD]);
  });

  t.test('a v1 quota of -1 means no limit', async (t) => {
    t.equal(cgroupCpuLimit(files({ [V1_QUOTA]: '-1', [V1_PERIOD]: '100000' }).reader), undefined);
  });

  t.test('no cgroup files at all means no limit', async (t) => {
    t.equal(cgroupCpuLimit(files({}).reader), undefined);
  });
});

t.test('resolveWorkerCount', async (t) => {
  t.test('a numeric count passes through untouched', async (t) => {
    t.same(resolveWorkerCount(3, { WEB_CONCURRENCY: '8' }, 16, 2), { count: 3 });
    t.same(resolveWorkerCount(12, {}, 2, 1), { count: 12 }, 'not capped by CPUs or cgroup either');
  });

  t.test('auto honours a valid WEB_CONCURRENCY over the CPU count and cgroup limit', async (t) => {
    t.same(resolveWorkerCount('auto', { WEB_CONCURRENCY: '6' }, 2, 1), { count: 6 });
    t.same(resolveWorkerCount('auto', { WEB_CONCURRENCY: '256' }, 2, 1), { count: 256 }, 'the upper bound is accepted');
    t.same(resolveWorkerCount('auto', { WEB_CONCURRENCY: ' 3 ' }, 8, undefined), { count: 3 }, 'surrounding spaces are tolerated');
  });

  for (const raw of ['abc', '0', '-1', '999', '2.5', '4workers']) {
    t.test(`an invalid WEB_CONCURRENCY "${raw}" warns and falls back to the CPU count`, async (t) => {
      const decision = resolveWorkerCount('auto', { WEB_CONCURRENCY: raw }, 4, 8);
      t.equal(decision.count, 4);
      t.match(decision.warning, `WEB_CONCURRENCY="${raw}"`);
    });
  }

  t.test('an empty WEB_CONCURRENCY is treated as unset, without a warning', async (t) => {
    t.same(resolveWorkerCount('auto', { WEB_CONCURRENCY: '' }, 4, 8), { count: 4, warning: undefined });
  });

  t.test('auto without WEB_CONCURRENCY uses the CPU count', async (t) => {
    t.same(resolveWorkerCount('auto', {}, 8, 16), { count: 8, warning: undefined }, 'a cgroup limit above the CPUs does not raise it');
  });

  t.test('a cgroup CPU limit caps the CPU count, rounded down', async (t) => {
    t.equal(resolveWorkerCount('auto', {}, 8, 2).count, 2);
    t.equal(resolveWorkerCount('auto', {}, 8, 2.9).count, 2);
    t.equal(resolveWorkerCount('auto', { WEB_CONCURRENCY: 'abc' }, 8, 3).count, 3, 'also when WEB_CONCURRENCY was rejected');
  });

  t.test('auto always gives at least one worker', async (t) => {
    t.equal(resolveWorkerCount('auto', {}, 8, 0.5).count, 1, 'half a CPU');
    t.equal(resolveWorkerCount('auto', {}, 0, 4).count, 1, 'no CPU reported');
  });
});

t.test('a malformed cgroup cpu.max is treated as no limit', async (t) => {
  const read = (file: string) => {
    if (file.endsWith('cpu.max')) return 'abc 100000\n';
    throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
  };
  t.equal(cgroupCpuLimit(read), undefined);
});
