import t from 'tap';
import { isAlive, request, ServerProcess, type ServerEvent } from '../helpers/server-process.js';
import { until } from '../helpers/wait.js';

t.test('a worker that posts garbage of every shape on its channel: each refused where it arrives, in a few log lines, and nothing crashes', async (t) => {
  const server = await ServerProcess.start({ workers: 2 });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  const reply = await request(server.port, '/fixture/garbage', { method: 'POST', body: {} });
  t.equal(reply.status, 200, reply.body);
  const result = reply.json() as { worker: number; sent: number; replies: Array<{ id: number; ok: boolean; error?: string }> };
  t.match(result.replies, [
    { ok: false, error: /primary\.workerState: parameters refused: \/action/ },
    { ok: false, error: /primary\.shed: parameters refused: \/organizations/ },
    { ok: false, error: /unknown method "primary\.nothing"/ },
    { ok: false, error: /primary\.restartWorkers: parameters refused: \/reason/ },
  ], 'requests the protocol refuses are answered with why, never handled');

  // Still the same two workers, ready, each serving; the primary answers its own surface too.
  const fleet = await server.command<{ workers: Array<{ pid: number; status: string }> }>('fleet');
  t.same(fleet.workers.map((worker) => worker.status), ['ready', 'ready'], 'no status taken from a malformed message');
  t.same(fleet.workers.map((worker) => worker.pid).sort(), ready.map((event) => event.pid).sort(), 'no worker replaced');
  const seen = new Set<number>();
  for (let i = 0; i < 20 && seen.size < 2; i++) seen.add((await request(server.port, '/whoami')).json().worker as number);
  t.equal(seen.size, 2, 'both workers serve');
  t.equal((await request(server.port, '/healthz')).status, 200);
  t.ok(isAlive(server.child.pid!), 'the primary is alive');
  t.equal(server.count((event) => event.event === 'worker:crash' || event.event === 'worker:exit'), 0, 'no process crashed or exited');
  t.equal(server.count((event) => event.event === 'restart:start'), 0, 'the refused restart request started nothing');

  // The primary's log reaches this process through its output, which may still be on the way.
  const isRefusal = (event: ServerEvent) => event.msg === 'refused a malformed message from a worker';
  await until('the refusal lines to arrive', () => server.count(isRefusal) >= 5 || undefined, 10_000, { last: () => server.count(isRefusal) });
  const refused = server.events.filter(isRefusal);
  t.equal(refused.length, 5, `${result.sent} malformed messages, five lines in the minute (the rest counted for the summary)`);
  for (const line of refused) t.match(line, { level: 40, targetWorker: result.worker, reason: String });
  t.equal(server.count((event) => /malformed (storage|ipc) message/.test(String(event.msg))), 0, 'no receiver writes a line of its own');
});
