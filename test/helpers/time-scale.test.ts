import t from 'tap';
import { MAX_AUTO_SCALE, resolveTimeScale } from './time-scale.mjs';

t.test('without the variable: 1 on a machine within its CPUs, else the load per CPU rounded up, capped', async (t) => {
  t.match(resolveTimeScale(undefined, 1.9, 2), { factor: 1, source: 'default' });
  t.match(resolveTimeScale(undefined, 2, 2), { factor: 1, source: 'default' }, 'a load equal to the CPU count is not over it');
  t.match(resolveTimeScale(undefined, 2.1, 2), { factor: 2, source: 'load' });
  t.match(resolveTimeScale(undefined, 9, 2), { factor: 5, source: 'load' });
  t.match(resolveTimeScale(undefined, 19, 2), { factor: 10, source: 'load' });
  t.match(resolveTimeScale(undefined, 500, 2), { factor: MAX_AUTO_SCALE, source: 'load' });
  t.match(resolveTimeScale('', 9, 2), { factor: 5 }, 'an empty value is no value');
});

t.test('the variable wins over the load, and must be a number ≥ 1', async (t) => {
  t.match(resolveTimeScale('1', 40, 2), { factor: 1, source: 'variable' });
  t.match(resolveTimeScale('2.5', 0, 2), { factor: 2.5, source: 'variable' });
  t.match(resolveTimeScale('30', 0, 2), { factor: 30 }, 'no cap on what is asked for');
  for (const value of ['0.99', '0', '-1', 'NaN', 'Infinity', 'fast', '2 s']) {
    t.throws(() => resolveTimeScale(value, 0, 2), { message: `FLEETPLANE_TEST_TIME_SCALE must be a number ≥ 1 (got ${JSON.stringify(value)})` }, value);
  }
});
