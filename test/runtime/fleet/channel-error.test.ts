import t from 'tap';
import { loadConfig } from '../../../src/config/load.js';
import { Fleet } from '../../../src/runtime/fleet/fleet.js';
import { PrimaryChannels } from '../../../src/runtime/channels.js';
import { SafeEmitter } from '../../../src/runtime/events.js';
import { PrimaryMetrics } from '../../../src/runtime/primary-metrics.js';
import { createLogger } from '../../../src/logging/logger.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { FakeForkPort } from '../../helpers/fake-workers.js';

/** A fleet of one fake worker whose primary logs at debug into `records`. */
function setup() {
  const records: Array<Record<string, unknown>> = [];
  const log = createLogger({ level: 'debug', base: { server: 's', worker: 0 }, destination: { write: (line: string) => void records.push(JSON.parse(line)) } });
  const { config } = loadConfig({ object: { workers: 1 }, env: {} });
  const port = new FakeForkPort();
  const fleet = new Fleet({
    config, manager: { organization_id: null, host: null }, serverId: 's', target: 1, log, events: new SafeEmitter(() => {}), clock: new FakeClock(), metrics: new PrimaryMetrics(),
    forkWorker: port, exitCode: { setExitCode: () => {} }, channels: new PrimaryChannels(), configureRpc: () => {}, onUnrecoverable: () => {},
    fleetReady: () => true, onReadinessChange: () => {},
  });
  fleet.start();
  return { worker: port.workers[0]!, records };
}

const errno = (message: string, code: string) => Object.assign(new Error(message), { code });

t.test('a worker channel that closes under a send (Ctrl-C signals every worker too) is a debug line without a stack', async (t) => {
  for (const [message, code] of [['write EPIPE', 'EPIPE'], ['Channel closed', 'ERR_IPC_CHANNEL_CLOSED']]) {
    const { worker, records } = setup();
    worker.channelError(errno(message!, code!));
    const record = records.find((entry) => /channel/.test(String(entry.msg)));
    t.match(record, { level: 20, msg: 'worker channel closed', code, targetWorker: 1 }, `${code}: debug`);
    t.notOk(records.some((entry) => (entry.level as number) >= 40), `${code}: no warning`);
    t.notOk(JSON.stringify(records).includes('stack'), `${code}: no stack`);
  }
});

t.test('any other channel error is still a warning with the error', async (t) => {
  const { worker, records } = setup();
  worker.channelError(errno('something unexpected', 'EINVAL'));
  t.match(records.find((entry) => entry.msg === 'worker channel error'), { level: 40, err: { message: 'something unexpected', code: 'EINVAL' } });
});
