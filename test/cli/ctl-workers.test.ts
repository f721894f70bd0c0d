import t from 'tap';
import { ctl, workerArgv } from '../../cli/ctl.js';

t.test('--worker takes the numbers after it, as the usage writes "--worker N...", besides repeated and comma forms', async (t) => {
  const expanded = ['cordon', '--worker', '1', '--worker', '2', '--value', 'true'];
  t.same(workerArgv(['cordon', '--worker', '1', '2', '--value', 'true']), expanded, '--worker 1 2');
  t.same(workerArgv(['cordon', '--worker', '1', '--worker', '2', '--value', 'true']), expanded, '--worker 1 --worker 2');
  t.same(workerArgv(['cordon', '--worker', '1,2', '--value', 'true']), expanded, '--worker 1,2');
  t.same(workerArgv(['cordon', '--worker=1', '2', '--value', 'true']), expanded, '--worker=1 2');
  t.same(workerArgv(['--worker', '3', 'status']), ['--worker', '3', 'status'], 'the method after the numbers stays the method');
  t.same(workerArgv(['status', '--master']), ['status', '--master'], 'no --worker: unchanged');
});

t.test('an unknown --worker form is one line with the accepted forms, exit 2, before anything is sent', async (t) => {
  const forms = '--worker 1 2, --worker 1 --worker 2 or --worker 1,2';
  for (const [argv, got] of [
    [['status', '--worker', 'two'], '"two"'],
    [['status', '--worker', '1,'], '"1,"'],
    [['status', '--worker', '-1'], '"-1"'],
    [['status', '--worker'], 'nothing'],
  ] as const) {
    await t.rejects(ctl(['--data-dir', '/nonexistent', ...argv]), { exitCode: 2, message: `--worker takes worker numbers (${forms}), got ${got}` }, argv.join(' '));
  }
});
