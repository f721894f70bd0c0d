import t from 'tap';
import { HandlerRegistry } from '../../src/ipc/handlers.js';
import type { DeliveredEnvelope } from '../../src/ipc/envelope.js';
import { registerBuiltins } from '../../src/state/builtins.js';
import type { ServerState } from '../../src/state/state.js';
import type { ClusterStorage } from '../../src/storage/index.js';

const delivered = (method: string): DeliveredEnvelope => ({ method, master: true, meta: { id: 'm-1', origin: { server: 'srv-a', worker: 0 }, hops: 0 } });

function registry(isPrimary: boolean): HandlerRegistry {
  const handlers = new HandlerRegistry();
  registerBuiltins(handlers, {
    id: 'srv-a',
    workerId: isPrimary ? 0 : 1,
    isPrimary,
    state: {} as ServerState,
    storage: {} as ClusterStorage,
    describe: () => ({ worker: 0, pid: 1, status: 'ready', uptimeMs: 1, connections: 0 }),
  });
  return handlers;
}

t.test("a control method whose subsystem is off here answers disabled, naming the setting that turns it on", async (t) => {
  const primary = registry(true);
  for (const method of ['autoscaler.status', 'autoscaler.pause', 'autoscaler.resume', 'autoscaler.signals']) {
    const reply = await primary.run(delivered(method));
    t.match(reply, { ok: false, error: { code: 'disabled', message: new RegExp(`^${method.replace('.', '\\.')}: the autoscaler is off on this server \\(autoscaler\\.enabled is false\\)`) } }, method);
  }
  t.match(await primary.run(delivered('socket.emit')), { ok: false, error: { code: 'wrong_target', message: /the workers answer it/ } });
  t.match(await primary.run(delivered('autoscalerx')), { ok: false, error: { code: 'unknown_method', message: 'no handler for "autoscalerx"' } }, 'a namespace is matched by its dotted segments only');
  t.match(await primary.run(delivered('no.such.method')), { ok: false, error: { code: 'unknown_method' } });
});

t.test('in a worker, the primary-only methods say where they are answered', async (t) => {
  const worker = registry(false);
  t.match(await worker.run(delivered('autoscaler.status')), { ok: false, error: { code: 'wrong_target', message: /master: true/ } });
  t.match(await worker.run(delivered('repository.reservations')), { ok: false, error: { code: 'wrong_target' } });
});

t.test('a registered handler wins over the explanation: an enabled subsystem answers itself', async (t) => {
  const primary = registry(true);
  primary.handle('autoscaler.status', () => ({ paused: false }));
  t.same(await primary.run(delivered('autoscaler.status')), { ok: true, result: { paused: false } });
  t.match(await primary.run(delivered('autoscaler.pause')), { ok: false, error: { code: 'disabled' } }, 'its siblings without a handler still explain');
});
