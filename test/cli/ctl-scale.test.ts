import t from 'tap';
import { scaleArgv } from '../../cli/ctl.js';
import { CliError } from '../../cli/usage.js';

t.test('ctl scale status|pause|resume sends the autoscaler method, to the primary unless a target is given', async (t) => {
  t.same(scaleArgv(['scale', 'status']), ['autoscaler.status', '--master']);
  t.same(scaleArgv(['scale', 'pause', '--json']), ['autoscaler.pause', '--json', '--master']);
  t.same(scaleArgv(['scale', 'resume', '--server', 's-2']), ['autoscaler.resume', '--server', 's-2']);
  t.same(scaleArgv(['scale', 'status', '--server=s-2']), ['autoscaler.status', '--server=s-2']);
  t.same(scaleArgv(['status', '--broadcast']), ['status', '--broadcast'], 'other methods pass through');
});

t.test('ctl scale with an unknown or missing command is a usage error', async (t) => {
  for (const argv of [['scale'], ['scale', 'grow']]) {
    let error: unknown;
    try {
      scaleArgv(argv);
    } catch (caught) {
      error = caught;
    }
    t.ok(error instanceof CliError, argv.join(' '));
    t.match(error, { exitCode: 2, message: /"ctl scale" takes status, pause, resume/ });
  }
});
