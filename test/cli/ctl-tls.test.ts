import t from 'tap';
import { tlsArgv } from '../../cli/ctl.js';

t.test('ctl tls reload sends tls.reload, to the primary unless a target is given', async (t) => {
  t.same(tlsArgv(['tls', 'reload']), ['tls.reload', '--master']);
  t.same(tlsArgv(['tls', 'reload', '--json', '--data-dir', '/d']), ['tls.reload', '--json', '--data-dir', '/d', '--master']);
  t.same(tlsArgv(['tls', 'reload', '--server', 's-2']), ['tls.reload', '--server', 's-2']);
  t.same(tlsArgv(['status', '--broadcast']), ['status', '--broadcast'], 'other methods pass through');
});

t.test('ctl tls revoke SERIAL sends tls.revoke with the serial, to the primary unless a target is given', async (t) => {
  t.same(tlsArgv(['tls', 'revoke', '5A0D19B0']), ['tls.revoke', '--value', '"5A0D19B0"', '--master']);
  t.same(tlsArgv(['tls', 'revoke', '5a0d', '--server', 's-2', '--json']), ['tls.revoke', '--value', '"5a0d"', '--server', 's-2', '--json']);
  for (const argv of [['tls', 'revoke'], ['tls', 'revoke', '--master']]) t.throws(() => tlsArgv(argv), { exitCode: 2, message: /takes the serial of a mesh certificate/ }, argv.join(' '));
});

t.test('ctl tls with another command is a usage error', async (t) => {
  for (const argv of [['tls'], ['tls', 'rotate']]) t.throws(() => tlsArgv(argv), { exitCode: 2, message: /"ctl tls" takes reload or revoke/ }, argv.join(' '));
});
