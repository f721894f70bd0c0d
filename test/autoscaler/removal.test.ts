import path from 'node:path';
import t from 'tap';
import { REMOVAL_METHOD, removalHandler, type RemovalDeps } from '../../src/autoscaler/removal.js';
import { tenantViolation } from '../../src/auth/authority.js';
import { ConfigError } from '../../src/config/errors.js';
import { loadConfig } from '../../src/config/load.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import type { DeliveredEnvelope } from '../../src/ipc/envelope.js';
import { settle } from '../helpers/fake-clock.js';
import { tempDir } from '../helpers/server-process.js';

const store = await EmbeddedStore.open(path.join(tempDir('fleetplane-removal-'), 'store.db'));
t.teardown(() => store.close());
let servers = 0;

interface Removal {
  handler: ReturnType<typeof removalHandler>;
  steps: string[];
  serverId: string;
}

async function removal(status: string | undefined, powerOff: Partial<RemovalDeps['powerOff']> & { code?: number } = {}): Promise<Removal> {
  const serverId = `s${servers++}`;
  if (status) await store.collection('servers').insertOne({ _id: serverId, cluster_id: 'c1', master: { status } });
  const steps: string[] = [];
  const handler = removalHandler({
    serverId,
    db: store,
    powerOff: { enabled: powerOff.enabled ?? false, command: powerOff.command ?? ['systemctl', 'poweroff'] },
    stop: async (reason) => void steps.push(`stop ${reason}`),
    exit: (code) => void steps.push(`exit ${code}`),
    log: { info: (_fields, message) => void steps.push(`info ${message}`), error: (_fields, message) => void steps.push(`error ${message}`) },
    runCommand: async (argv) => (steps.push(`run ${argv.join(' ')}`), { code: powerOff.code ?? 0, stderr: powerOff.code ? 'no permission' : '' }),
  });
  return { handler, steps, serverId };
}

const envelope = (confirm?: string): DeliveredEnvelope => ({ method: REMOVAL_METHOD, master: true, ...(confirm ? { confirm } : {}), meta: { id: 'x', origin: { server: 'decider', worker: 0 }, hops: 1 } });

t.test('a server being removed stops gracefully and exits 0; the host stays on by default', async (t) => {
  const { handler, steps, serverId } = await removal('terminating');
  t.same(await handler(undefined, envelope(serverId)), { removing: true, powerOff: false }, 'answered before it stops');
  t.same(steps, [], 'nothing stopped before the answer left');
  await settle();
  await settle();
  t.same(steps, ['info removed from the cluster: stopping gracefully', 'stop shutdown', 'exit 0']);
  t.same(await handler(undefined, envelope(serverId)), { removing: true, powerOff: false });
  await settle();
  t.equal(steps.filter((step) => step.startsWith('stop')).length, 1, 'asked twice, stopped once');
});

t.test('only a server its cluster is removing stops this way, and only when the envelope names it', async (t) => {
  for (const status of ['running', 'failed', undefined]) {
    const { handler, steps, serverId } = await removal(status);
    await t.rejects(handler(undefined, envelope(serverId)), { code: 'bad_request', message: new RegExp(`record is ${status ?? 'missing'}, not terminating`) }, `a ${status ?? 'missing'} record`);
    await settle();
    t.same(steps, [], 'nothing stops');
  }
  const { handler, steps } = await removal('terminating');
  await t.rejects(handler(undefined, envelope()), { code: 'bad_request', message: /confirm must be this server's id/ }, 'a broadcast names no server');
  await t.rejects(handler(undefined, envelope('another-server')), { code: 'bad_request' });
  await settle();
  t.same(steps, []);
});

t.test('with the operator opted in, the host is powered off after the graceful stop; a failed command exits 1', async (t) => {
  const on = await removal('terminating', { enabled: true, command: ['/sbin/poweroff', '--now'] });
  t.same(await on.handler(undefined, envelope(on.serverId)), { removing: true, powerOff: true });
  for (let turn = 0; turn < 4; turn++) await settle();
  t.same(on.steps, ['info removed from the cluster: stopping gracefully, then powering the host off', 'stop shutdown', 'run /sbin/poweroff --now', 'info the power-off command ran', 'exit 0']);
  const failing = await removal('terminating', { enabled: true, code: 1 });
  await failing.handler(undefined, envelope(failing.serverId));
  for (let turn = 0; turn < 4; turn++) await settle();
  t.same(failing.steps.slice(1), ['stop shutdown', 'run systemctl poweroff', 'error the power-off command failed', 'exit 1']);
});

t.test('autoscaler.remove is a server method: no tenant key, admin or not, may send it', async (t) => {
  t.match(tenantViolation({ method: REMOVAL_METHOD }), /only the platform organization may call it/);
});

t.test('autoscaler.powerOffOnRemoval: refused without lifecycle.hostControl, accepted with it, and a typo is named', async (t) => {
  const load = (object: Record<string, unknown>) => loadConfig({ env: {}, object });
  t.throws(() => load({ autoscaler: { powerOffOnRemoval: true } }), new ConfigError('autoscaler.powerOffOnRemoval', 'needs lifecycle.hostControl: true (the power-off runs lifecycle.shutdownCommand)'));
  t.equal(load({ autoscaler: { powerOffOnRemoval: true }, lifecycle: { hostControl: true } }).config.autoscaler.powerOffOnRemoval, true);
  t.equal(load({}).config.autoscaler.powerOffOnRemoval, false, 'off by default');
  t.throws(() => load({ autoscaler: { powerOffOnRemove: true } }), { field: 'autoscaler.powerOffOnRemove', message: /did you mean "autoscaler.powerOffOnRemoval"/ });
  t.throws(() => loadConfig({ env: { FLEETPLANE_AUTOSCALER_POWER_OFF_ON_REMOVAL: 'true' } }), { message: /^environment variable FLEETPLANE_AUTOSCALER_POWER_OFF_ON_REMOVAL: autoscaler\.powerOffOnRemoval: needs/ }, 'named by where it came from');
});
