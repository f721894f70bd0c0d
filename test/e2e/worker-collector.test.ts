import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { request, ServerProcess } from '../helpers/server-process.js';

/** The Node flags a process was started with, from /proc. */
const flagsOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((part) => part.startsWith('--'));

/** A server with one worker, once that worker serves; what `/whoami` answers from it. */
async function whoami(t: Test, workers: Record<string, unknown>) {
  const server = await ServerProcess.start({ workers });
  t.teardown(() => server.stop());
  await server.waitFor((event) => event.event === 'worker:ready', 30_000);
  const answer = await request(server.port, '/whoami');
  t.equal(answer.status, 200, answer.body);
  return answer.json() as { pid: number; gc: string };
}

t.test('workers start with --expose-gc, and application code in them finds no gc unless the operator asked for it', async (t) => {
  const reply = await whoami(t, { count: 1 });
  t.ok(flagsOf(reply.pid).includes('--expose-gc'), 'the worker runs with the flag');
  t.equal(reply.gc, 'undefined', 'the global gc is taken from application code');
});

t.test('with --expose-gc in workers.execArgv, the global gc stays for the operator', async (t) => {
  t.equal((await whoami(t, { count: 1, execArgv: ['--expose-gc'] })).gc, 'function');
});
