import t from 'tap';
import { EventEmitter } from 'node:events';
import { onFleetReady } from '../../src/lifecycle/startup-readiness.js';

function fleet(target: number) {
  const events = new EventEmitter();
  const state = { target, active: 0 };
  return {
    state,
    source: { on: events.on.bind(events), off: events.off.bind(events), fleetHealth: () => ({ ...state }) },
    ready: () => {
      state.active += 1;
      events.emit('worker:ready');
    },
    lose: () => void (state.active -= 1),
    listeners: () => events.listenerCount('worker:ready') + events.listenerCount('status_change'),
    localReady: () => {
      state.active = state.target;
      events.emit('status_change');
    },
  };
}

t.test('readiness is announced when the last worker of the fleet is ready, not before', async (t) => {
  const f = fleet(3);
  let calls = 0;
  onFleetReady(f.source, () => (calls += 1));
  f.ready();
  f.ready();
  t.equal(calls, 0);
  f.ready();
  t.equal(calls, 1);
});

t.test('every worker ready in a complete fleet is readiness again (a replacement after a crash)', async (t) => {
  const f = fleet(2);
  let calls = 0;
  const stop = onFleetReady(f.source, () => (calls += 1));
  f.ready();
  f.ready();
  t.equal(calls, 1);
  f.lose();
  f.lose();
  f.ready();
  t.equal(calls, 1, 'one of two replacements ready: not complete');
  f.ready();
  t.equal(calls, 2, 'complete again: announced again (its consumers share their first run)');
  stop();
  t.equal(f.listeners(), 0, 'stop removes the listener');
});

t.test('already serving (single-process mode after listen): announced at once', async (t) => {
  const f = fleet(1);
  f.state.active = 1;
  let calls = 0;
  onFleetReady(f.source, () => (calls += 1));
  t.equal(calls, 1);
});

t.test('single-process mode: the in-process worker turning ready is readiness', async (t) => {
  const f = fleet(1);
  let calls = 0;
  onFleetReady(f.source, () => (calls += 1));
  t.equal(calls, 0, 'not listening yet');
  f.localReady();
  t.equal(calls, 1);
});
