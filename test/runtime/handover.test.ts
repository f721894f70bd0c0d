import t from 'tap';
import pino from 'pino';
import { FakeClock } from '../helpers/fake-clock.js';
import { Handover, handoverRefusal, type HandoverParts, type SuccessorProcess } from '../../src/runtime/handover.js';
import type { PredecessorMessage } from '../../src/runtime/handover-messages.js';

/** A new primary that does only what the test makes it say. */
class FakeSuccessor implements SuccessorProcess {
  readonly pid = 4242;
  readonly sent: Array<{ message: PredecessorMessage; handle?: unknown }> = [];
  killed = false;
  released = false;
  private listener: (message: unknown) => void = () => {};
  private gone: (how: string) => void = () => {};
  send(message: PredecessorMessage, handle?: unknown): void {
    this.sent.push({ message, handle });
  }
  onMessage(listener: (message: unknown) => void): void {
    this.listener = listener;
  }
  onGone(listener: (how: string) => void): void {
    this.gone = listener;
  }
  kill(): void {
    this.killed = true;
  }
  release(): void {
    this.released = true;
  }
  say(message: Record<string, unknown>): void {
    this.listener({ fp: 'handover', ...message });
  }
  exit(how: string): void {
    this.gone(how);
  }
  types(): string[] {
    return this.sent.map((entry) => entry.message.type);
  }
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

function setup(options: { refusal?: () => string | undefined } = {}) {
  const clock = new FakeClock();
  const calls: string[] = [];
  const successor = new FakeSuccessor();
  const held: Array<() => void> = [];
  const parts: HandoverParts = {
    storage: {
      freeze: () => {
        calls.push('freeze');
        return { revision: 7, entries: [['k', 1]] };
      },
      thaw: () => calls.push('thaw'),
      forwardTo: () => calls.push('forward'),
    },
    shed: () => ['org-x'],
    sockets: () => [{ role: 'mesh', host: '127.0.0.1', port: 8090, handle: 'mesh-handle' }],
    committed: () => calls.push('committed'),
    release: async () => void calls.push('release'),
  };
  const handover = new Handover({
    clock,
    log: pino({ level: 'silent' }),
    version: '1.0.0',
    readyTimeoutMs: 5_000,
    spawn: () => successor,
    sockets: () => [{ role: 'http', host: '127.0.0.1', port: 8080, handle: 'http-handle' }],
    refusal: options.refusal ?? (() => undefined),
    retire: async () => void calls.push('retire'),
    exit: () => calls.push('exit'),
  });
  handover.register(parts);
  return { clock, calls, successor, handover, held };
}

t.test('a hand-over runs seed, sockets, go; commits only on taken; then drains, releases and exits', async (t) => {
  const { calls, successor, handover } = setup();
  const result = handover.start('test');
  successor.say({ type: 'hello', pid: 4242, version: '2.0.0' });
  t.same(successor.types(), ['seed'], 'the state first');
  t.match(successor.sent[0]!.message, { listening: { http: { port: 8080 }, mesh: { port: 8090 } }, storage: { revision: 7 }, shed: ['org-x'], version: '1.0.0' });
  t.same(calls, ['freeze'], 'storage writes wait from the seed on');
  successor.say({ type: 'sockets' });
  t.same(successor.sent.slice(1).map((entry) => [entry.message, entry.handle]), [[{ fp: 'handover', type: 'socket', role: 'http' }, 'http-handle'], [{ fp: 'handover', type: 'socket', role: 'mesh' }, 'mesh-handle']]);
  successor.say({ type: 'progress', ready: 2, target: 2 });
  successor.say({ type: 'ready' });
  t.equal(successor.types().at(-1), 'go');
  t.same(calls, ['freeze'], 'nothing is closed before the new primary says it took over');
  successor.say({ type: 'taken' });
  t.match(await result, { from: { version: '1.0.0' }, to: { pid: 4242, version: '2.0.0' }, trigger: 'test' });
  await flush();
  t.same(calls, ['freeze', 'forward', 'committed', 'retire', 'release', 'exit']);
  t.equal(successor.types().at(-1), 'released');
  t.ok(successor.released);
  t.notOk(successor.killed);
  await t.rejects(handover.start('again'), { code: 'refused', message: /already handed over to pid 4242/ });
});

t.test('launch tells the new primary\'s pid as soon as it is started, and done settles as start does; a refusal is thrown at once', async (t) => {
  const { successor, handover } = setup();
  const launched = handover.launch('restart envelope');
  t.equal(launched.successor, 4242, 'the new primary, before it said anything');
  t.same(successor.types(), [], 'nothing sent yet: the hand-over has only begun');
  t.throws(() => handover.launch('again'), { code: 'refused', message: /a hand-over is already running \(asked by restart envelope, to pid 4242\)/ });
  successor.say({ type: 'hello', pid: 4242, version: '2.0.0' });
  successor.say({ type: 'sockets' });
  successor.say({ type: 'ready' });
  successor.say({ type: 'taken' });
  t.match(await launched.done, { to: { pid: 4242, version: '2.0.0' }, trigger: 'restart envelope' });

  const refused = setup({ refusal: () => 'this primary is shutting down' });
  t.throws(() => refused.handover.launch('restart envelope'), { code: 'refused', message: 'this primary is shutting down' });
  t.equal(refused.handover.inProgress, false);
});

t.test('one hand-over at a time: a second request is refused with who asked', async (t) => {
  const { successor, handover, clock } = setup();
  const first = handover.start('SIGUSR2');
  await t.rejects(handover.start('SIGUSR2'), { code: 'refused', message: /a hand-over is already running \(asked by SIGUSR2, to pid 4242\)/ });
  clock.advance(5_000);
  await t.rejects(first, { code: 'aborted' });
  t.ok(successor.killed);
});

t.test('workers not ready in time: aborted with the count, storage thawed, the new primary killed', async (t) => {
  const { calls, successor, handover, clock } = setup();
  const result = handover.start('test');
  successor.say({ type: 'hello', pid: 4242, version: '2.0.0' });
  successor.say({ type: 'sockets' });
  successor.say({ type: 'progress', ready: 1, target: 2 });
  clock.advance(4_999);
  t.notOk(successor.killed, 'not before workers.readyTimeoutMs');
  clock.advance(1);
  await t.rejects(result, { code: 'aborted', message: /keeps serving: the new primary's workers were not all ready within workers\.readyTimeoutMs \(5000 ms\): 1 of 2 ready/ });
  t.ok(successor.killed);
  t.same(calls, ['freeze', 'thaw'], 'the held storage writes are made here after all; nothing else happened');
  t.notOk(successor.types().includes('go'));
});

t.test('the new primary exiting, or failing with a reason, aborts with that reason', async (t) => {
  const exiting = setup();
  const exited = exiting.handover.start('test');
  exiting.successor.exit('exited with code 2');
  await t.rejects(exited, { message: /the new primary \(pid 4242\) exited with code 2 before it took over/ });
  t.same(exiting.calls, [], 'it never said hello: nothing frozen');

  const failing = setup();
  const failed = failing.handover.start('test');
  failing.successor.say({ type: 'hello', pid: 4242, version: '2.0.0' });
  failing.successor.say({ type: 'failed', reason: 'http.port is 9000 here but the old primary listens on 8080' });
  await t.rejects(failed, { message: /failed: http\.port is 9000 here/ });
  t.same(failing.calls, ['freeze', 'thaw']);
  t.notOk(failing.successor.types().includes('socket'), 'no socket moved');
});

t.test('refused before starting; and a shutdown begun meanwhile aborts at the commit point', async (t) => {
  const refused = setup({ refusal: () => 'a rolling restart is running: upgrade once it completed' });
  await t.rejects(refused.handover.start('test'), { code: 'refused', message: /rolling restart/ });

  let stopping = false;
  const late = setup({ refusal: () => (stopping ? 'this primary is shutting down' : undefined) });
  const result = late.handover.start('test');
  late.successor.say({ type: 'hello', pid: 4242, version: '2.0.0' });
  late.successor.say({ type: 'sockets' });
  stopping = true;
  late.successor.say({ type: 'ready' });
  await t.rejects(result, { message: /shutting down/ });
  t.notOk(late.successor.types().includes('go'));
  t.ok(late.successor.killed);
});

t.test('handoverRefusal names each state that cannot hand over', async (t) => {
  const ready = { fleet: true, started: true, stopping: false, rolling: false };
  t.equal(handoverRefusal(ready, 1234), undefined);
  t.match(handoverRefusal({ ...ready, fleet: false }, 1234), /single-process mode/);
  t.match(handoverRefusal({ ...ready, started: false }, 1234), /still starting/);
  t.match(handoverRefusal({ ...ready, stopping: true }, 1234), /shutting down/);
  t.match(handoverRefusal({ ...ready, rolling: true }, 1234), /rolling restart/);
  t.match(handoverRefusal(ready, 1), /PID 1/);
});
