import t from 'tap';
import { parsePolicy, PolicyError } from '../../src/autoscaler/policy.js';

t.test('a policy with only the sizes gets the defaults', async (t) => {
  const policy = parsePolicy({ minClusterSize: 0, maxClusterSize: 3 });
  t.same(policy, {
    minClusterSize: 0,
    maxClusterSize: 3,
    cpu: { scaleOutAbove: 75, scaleInBelow: 25 },
    memory: { scaleOutAbove: 80, scaleInBelow: 40 },
    windowMs: 60_000,
    cooldownMs: 300_000,
    decommissionStrategy: 'newest',
    paused: false,
  });
  t.equal(parsePolicy({ minClusterSize: 0, maxClusterSize: 3, paused: true }).paused, true, 'the pause is part of the policy');
});

t.test('bad policies are refused naming the field', async (t) => {
  const cases: Array<[unknown, string, RegExp]> = [
    [{ minClusterSize: 4, maxClusterSize: 3 }, 'minClusterSize', /must not exceed maxClusterSize \(3\)/],
    [{ minClusterSize: -1, maxClusterSize: 3 }, 'minClusterSize', /greater or equal to 0/],
    [{ minClusterSize: 1, maxClusterSize: 3, cpu: { scaleOutAbove: 70, scaleInBelow: -5 } }, 'cpu.scaleInBelow', /greater or equal to 0/],
    [{ minClusterSize: 1, maxClusterSize: 3, cooldownMs: 0 }, 'cooldownMs', /greater or equal to 1000/],
    [{ minClusterSize: 1, maxClusterSize: 3, cooldown: 60_000 }, 'cooldown', /unknown field/],
    [{ minClusterSize: 1, maxClusterSize: 3, memory: { scaleOutAbove: 80, scaleInBelow: 40, max: 1 } }, 'memory.max', /unknown field/],
    [{ minClusterSize: 1, maxClusterSize: 3, cpu: { scaleOutAbove: 50, scaleInBelow: 50 } }, 'cpu.scaleInBelow', /must be below cpu.scaleOutAbove \(50\)/],
    [{ minClusterSize: 1, maxClusterSize: 3, decommissionStrategy: 'oldest' }, 'decommissionStrategy', /./],
    [{ maxClusterSize: 3 }, 'minClusterSize', /required/],
    [{ minClusterSize: 1, maxClusterSize: 3, paused: 'yes' }, 'paused', /boolean/],
    ['3', 'policy', /object/],
  ];
  for (const [input, field, message] of cases) {
    const error = t.throws(() => parsePolicy(input), PolicyError, JSON.stringify(input)) as PolicyError;
    t.equal(error.field, field, `${JSON.stringify(input)} names ${field}`);
    t.match(error.message, message);
  }
});
