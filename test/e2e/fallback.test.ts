import t from 'tap';
import { ServerProcess, request } from '../helpers/server-process.js';

let shared: Promise<ServerProcess> | undefined;
/** One two-worker server with a fallback target, for the tests that uncordon what they cordoned. */
function sharedServer(): Promise<ServerProcess> {
  shared ??= ServerProcess.start({ workers: 2, fallback: { redirect: 'https://lb.example.test/base/' } }).then(async (server) => {
    await server.readyWorkers(2);
    return server;
  });
  return shared;
}
t.teardown(async () => (await shared)?.stop());

t.test('all workers cordoned: the primary answers 307 to the fallback target, readyz 503, healthz 200; uncordon serves again', async (t) => {
  const server = await sharedServer();

  const before = await request(server.port, '/whoami');
  t.equal(before.status, 200, 'a worker serves before cordon');

  await server.command('cordon', { value: true });
  const redirect = await request(server.port, '/some/path?x=1&y=two');
  t.equal(redirect.status, 307);
  t.equal(redirect.headers.location, 'https://lb.example.test/base/some/path?x=1&y=two', 'Location = fallback.redirect + path + query');
  t.equal(redirect.headers['cache-control'], 'no-store');
  t.equal(redirect.headers.connection, 'close');

  const ready = await request(server.port, '/readyz');
  t.equal(ready.status, 503, 'readyz answered by the fallback is 503');
  t.equal(ready.json().status, 'fallback');
  const live = await request(server.port, '/healthz');
  t.equal(live.status, 200, 'healthz stays 200 while the primary lives');

  await server.command('cordon', { value: false });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) {
    const reply = await request(server.port, '/whoami');
    t.equal(reply.status, 200, 'served by a worker again');
    seen.add(reply.json().worker);
  }
  t.same([...seen].sort(), [1, 2], 'new connections go round-robin over both workers');
  t.equal((await request(server.port, '/readyz')).status, 200);
});

t.test('no fallback target: 503 with Retry-After', async (t) => {
  const server = await ServerProcess.start({ workers: 1, fallback: { retryAfterS: 7 } });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);
  await server.command('cordon', { value: true });
  const reply = await request(server.port, '/anything');
  t.equal(reply.status, 503);
  t.equal(reply.headers['retry-after'], '7');
  t.equal(reply.headers.connection, 'close');
  t.equal(reply.json().error.code, 'unavailable');
});

t.test('cordoning one worker sends new connections to the other only', async (t) => {
  const server = await sharedServer();
  await server.command('cordon', { value: true, worker: 1 });
  for (let i = 0; i < 6; i++) t.equal((await request(server.port, '/whoami')).json().worker, 2);
  await server.command('cordon', { value: false, worker: 1 });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) seen.add((await request(server.port, '/whoami')).json().worker);
  t.same([...seen].sort(), [1, 2]);
});

t.test('single-process mode (workers: 0) serves and falls back the same way', async (t) => {
  const server = await ServerProcess.start({ workers: 0, fallback: { redirect: 'http://lb.example.test' } });
  t.teardown(() => server.stop());
  const reply = await request(server.port, '/whoami');
  t.equal(reply.status, 200);
  t.equal(reply.json().worker, 0);
  t.equal(reply.json().pid, server.child.pid, 'served by the primary itself');
  await server.command('cordon', { value: true });
  const redirect = await request(server.port, '/x?y=1');
  t.equal(redirect.status, 307);
  t.equal(redirect.headers.location, 'http://lb.example.test/x?y=1');
  await server.command('cordon', { value: false });
  t.equal((await request(server.port, '/whoami')).status, 200);
});
