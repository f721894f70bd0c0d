import t from 'tap';
import { Writable } from 'node:stream';
import { settle } from '../helpers/fake-clock.js';
import { SafeEmitter, serverEvents } from '../../src/runtime/events.js';
import { createLogger } from '../../src/logging/logger.js';

const payload = { workerId: 1, pid: 42 };

function emitter() {
  const errors: Array<{ event: string; error: unknown }> = [];
  return { events: new SafeEmitter((event, error) => errors.push({ event, error })), errors };
}

t.test('listeners receive the payload and emitSafe reports whether anyone listened', async (t) => {
  const { events } = emitter();
  t.equal(events.emitSafe('worker:online', payload), false, 'no listener yet');
  const received: unknown[] = [];
  events.on('worker:online', (value) => received.push(value));
  t.equal(events.emitSafe('worker:online', payload), true);
  t.same(received, [payload]);
});

t.test('a throwing listener is reported and later listeners still run', async (t) => {
  const { events, errors } = emitter();
  const calls: string[] = [];
  events.on('worker:online', () => calls.push('first'));
  events.on('worker:online', () => {
    throw new Error('listener bug');
  });
  events.on('worker:online', () => calls.push('third'));
  t.equal(events.emitSafe('worker:online', payload), true, 'emitSafe itself does not throw');
  t.same(calls, ['first', 'third']);
  t.equal(errors.length, 1);
  t.equal(errors[0]!.event, 'worker:online');
  t.match(errors[0]!.error, { message: 'listener bug' });
});

t.test('a rejecting async listener is reported and later listeners still run', async (t) => {
  const { events, errors } = emitter();
  const calls: string[] = [];
  events.on('worker:crash', async () => {
    await settle();
    throw new Error('async listener bug');
  });
  events.on('worker:crash', () => calls.push('after'));
  events.emitSafe('worker:crash', { workerId: 1, pid: 42, code: 1, signal: null, bootFailure: false });
  t.same(calls, ['after']);
  await settle();
  await settle();
  t.equal(errors.length, 1);
  t.equal(errors[0]!.event, 'worker:crash');
  t.match(errors[0]!.error, { message: 'async listener bug' });
});

t.test('a once listener runs a single time through emitSafe', async (t) => {
  const { events } = emitter();
  let calls = 0;
  events.once('worker:ready', () => calls++);
  events.emitSafe('worker:ready', payload);
  events.emitSafe('worker:ready', payload);
  t.equal(calls, 1);
  t.equal(events.listenerCount('worker:ready'), 0);
});

t.test('a throwing once listener is reported and removed', async (t) => {
  const { events, errors } = emitter();
  events.once('worker:ready', () => {
    throw new Error('once bug');
  });
  events.emitSafe('worker:ready', payload);
  events.emitSafe('worker:ready', payload);
  t.equal(errors.length, 1);
});

t.test('a listener added while emitting waits for the next emit', async (t) => {
  const { events } = emitter();
  const calls: string[] = [];
  events.on('worker:online', () => {
    calls.push('outer');
    events.on('worker:online', () => calls.push('added'));
  });
  events.emitSafe('worker:online', payload);
  t.same(calls, ['outer']);
});

t.test('a server event listener that throws is logged by the event source of the server and the listeners after it still run', async (t) => {
  const records: Array<Record<string, any>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) records.push(JSON.parse(line));
      done();
    },
  });
  const events = serverEvents(createLogger({ level: 'info', destination }));
  const heard: string[] = [];
  events.on('organization.active', () => {
    throw new Error('listener bug');
  });
  events.on('organization.active', ({ organization_id }) => heard.push(organization_id));
  t.equal(events.emitSafe('organization.active', { organization_id: 'org-1' }), true);
  t.same(heard, ['org-1']);
  await new Promise((resolve) => setImmediate(resolve));
  t.match(records, [{ msg: 'event listener failed', event: 'organization.active', err: { message: 'listener bug' } }]);
});
