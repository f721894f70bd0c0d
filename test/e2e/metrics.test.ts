import t from 'tap';
import { ServerProcess, request } from '../helpers/server-process.js';

t.test('/metrics: Prometheus text aggregated over the primary and every worker', async (t) => {
  const server = await ServerProcess.start({ workers: 2, metrics: { public: true } });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  process.kill(ready[0]!.pid as number, 'SIGKILL');
  await server.readyWorkers(3);

  const reply = await request(server.port, '/metrics');
  t.equal(reply.status, 200);
  t.match(reply.headers['content-type'], /^text\/plain/);
  t.match(reply.body, /^fleetplane_worker_restarts_total 1$/m, 'primary counters are included');
  t.match(reply.body, /^fleetplane_worker_crashes_total 1$/m);
  t.match(reply.body, /^fleetplane_workers_active 2$/m);
  t.match(reply.body, /^fleetplane_workers_target 2$/m);
  const heap = reply.body.match(/^fleetplane_nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\d+(?:\.\d+)?(?:e\+\d+)?)$/m);
  t.ok(heap, 'worker process metrics are included');

  const fromPrimary = await server.command<string>('metrics');
  t.match(fromPrimary, /fleetplane_connections_handed_total \d+/);
});
