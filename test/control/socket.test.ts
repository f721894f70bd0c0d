import { existsSync } from 'node:fs';
import t from 'tap';
import { ControlSocket, ServerRunningError, callControlSocket, controlSocketPath } from '../../src/control/socket.js';
import { createLogger } from '../../src/logging/logger.js';
import { tempDir } from '../helpers/server-process.js';

const log = createLogger({ level: 'silent' });
const answer = async (envelope: unknown) => ({ id: 'x', replies: [{ server: 's', worker: 0, ok: true, result: envelope }], missing: [] });

t.test('the control socket answers once opened, refuses a second server on the same directory, and is gone once released', async (t) => {
  const dataDir = tempDir();
  let released = 0;
  const socket = await ControlSocket.open({ dataDir, log, request: answer, deferred: false, onRelease: () => released++ });
  t.teardown(() => socket.release());
  const reply = await callControlSocket(controlSocketPath(dataDir), { envelope: { method: 'status' } }, 5_000);
  t.match(reply, { ok: true, result: { replies: [{ result: { method: 'status' } }] } });
  await t.rejects(ControlSocket.open({ dataDir, log, request: answer, deferred: false, onRelease: () => {} }), ServerRunningError);
  socket.release();
  t.notOk(existsSync(controlSocketPath(dataDir)), 'the socket file is removed');
  t.equal(released, 1, 'with what the release takes along (the pid file)');
});

t.test("a hand-over's new primary opens nothing until it takes the socket over; the old one, handed over, removes nothing", async (t) => {
  const dataDir = tempDir();
  const old = await ControlSocket.open({ dataDir, log, request: async () => ({ id: 'old', replies: [], missing: [] }), deferred: false, onRelease: () => t.fail('the old primary removes nothing after a hand-over') });
  const successor = await ControlSocket.open({ dataDir, log, request: async () => ({ id: 'new', replies: [], missing: [] }), deferred: true, onRelease: () => {} });
  t.teardown(() => successor.release());
  t.match(await callControlSocket(controlSocketPath(dataDir), { envelope: {} }, 5_000), { ok: true, result: { id: 'old' } }, 'the old primary still answers');
  await successor.takeOver();
  old.handedOver();
  old.release();
  t.ok(existsSync(controlSocketPath(dataDir)), "the name is the new primary's and stays");
  t.match(await callControlSocket(controlSocketPath(dataDir), { envelope: {} }, 5_000), { ok: true, result: { id: 'new' } }, 'the new primary answers on it');
});

t.test('an internal method is refused on the control socket with 403 forbidden, and never reaches the server', async (t) => {
  const dataDir = tempDir();
  const asked: unknown[] = [];
  const socket = await ControlSocket.open({ dataDir, log, request: async (envelope) => (asked.push(envelope), answer(envelope)), deferred: false, onRelease: () => {} });
  t.teardown(() => socket.release());
  const event = { server: 's', seq: 1, at: 1, kind: 'crash', worker: 1, message: 'worker 1 (pid 1) crashed: exit code 1' };
  const reply = await callControlSocket(controlSocketPath(dataDir), { envelope: { method: 'overview.emit', broadcast: true, data: event } }, 5_000);
  t.same(reply, { ok: false, error: { code: 'forbidden', message: '"overview.emit" is internal: only the server\'s own processes send it, and no key may', status: 403 } });
  t.same(asked, [], 'nothing was routed');
  t.match(await callControlSocket(controlSocketPath(dataDir), { envelope: { method: 'overview.events', master: true } }, 5_000), { ok: true }, 'the overview methods that read still pass');
});
