import http from 'node:http';
import t from 'tap';
import { ServerProcess } from '../helpers/server-process.js';
import { killOnExit } from './cleanup.js';

// kill -9 of a worker under paced load: requests already inside the killed worker may fail, nothing else. A
// connection the primary accepted after the kill (or accepted before and not yet taken by the worker) must be
// served by the surviving worker.

const KILLS = 6;
const INTERVAL_MS = 8;
const MAX_IN_FLIGHT = 64;

interface Attempt {
  startedAt: number;
  endedAt?: number;
  ok: boolean;
  error?: string;
  pid?: number;
}

/** One new connection per request, started every INTERVAL_MS (fewer when MAX_IN_FLIGHT are open). */
function pacedLoad(port: number) {
  const attempts: Attempt[] = [];
  let inFlight = 0;
  const once = () => {
    if (inFlight >= MAX_IN_FLIGHT) return;
    inFlight++;
    const attempt: Attempt = { startedAt: Date.now(), ok: false };
    attempts.push(attempt);
    const request = http.get({ host: '127.0.0.1', port, path: '/whoami', agent: false, timeout: 30_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () => {
        attempt.ok = response.statusCode === 200;
        if (attempt.ok) attempt.pid = (JSON.parse(body) as { pid: number }).pid;
        else attempt.error = `status ${response.statusCode} ${body.slice(0, 120)}`;
        attempt.endedAt = Date.now();
        inFlight--;
      });
      response.on('error', (error) => {
        attempt.error = error.message;
        attempt.endedAt = Date.now();
        inFlight--;
      });
    });
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', (error) => {
      if (attempt.error === undefined && !attempt.ok) {
        attempt.error = error.message;
        attempt.endedAt = Date.now();
        inFlight--;
      }
    });
  };
  const timer = setInterval(once, INTERVAL_MS);
  return {
    attempts,
    async stop() {
      clearInterval(timer);
      const deadline = Date.now() + 20_000;
      while (inFlight > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    },
  };
}

interface Fleet {
  workers: Array<{ worker: number; pid: number; status: string }>;
}

t.test('after kill -9 of a worker, every connection started after the kill is served by the other', async (t) => {
  // A generous ready timeout: on a busy machine a replacement booting under load may take long.
  const server = await ServerProcess.start({ workers: { count: 2, readyTimeoutMs: 120_000 }, restart: { backoffMs: 20, maxBackoffMs: 200, stabilityWindowMs: 500, crashThreshold: 100 } });
  killOnExit(server.child.pid);
  t.teardown(() => server.stop());
  await server.readyWorkers(2, 0, 60_000);
  const load = pacedLoad(server.port);
  const kills: Array<{ at: number; pid: number }> = [];
  try {
    for (let kill = 0; kill < KILLS; kill++) {
      // Both workers serving, under load for a moment.
      const deadline = Date.now() + 120_000;
      let fleet = await server.command<Fleet>('fleet');
      while (fleet.workers.filter((worker) => worker.status === 'ready').length < 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        fleet = await server.command<Fleet>('fleet');
      }
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.random() * 300));
      const victim = fleet.workers[Math.floor(Math.random() * fleet.workers.length)]!.pid;
      const at = Date.now();
      process.kill(victim, 'SIGKILL');
      kills.push({ at, pid: victim });
      await server.waitFor((event) => event.event === 'worker:exit' && event.pid === victim, 30_000);
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  } finally {
    await load.stop();
  }

  const failed = load.attempts.filter((attempt) => !attempt.ok);
  // A failure is the doing of the last kill before it ended; it is allowed only if it started before that kill.
  const killBefore = (at: number) => kills.filter((kill) => kill.at <= at).at(-1);
  const lateFailures = failed.filter((attempt) => {
    const kill = killBefore(attempt.endedAt ?? Date.now());
    return kill === undefined || attempt.startedAt > kill.at;
  });
  t.comment(`${load.attempts.length} requests, ${failed.length} failed across ${KILLS} kills; ${lateFailures.length} of them started after the kill`);
  t.ok(load.attempts.length > KILLS * 100, 'the load ran throughout');
  t.same(
    lateFailures.map((attempt) => {
      const kill = killBefore(attempt.endedAt ?? Date.now());
      return kill ? `started ${attempt.startedAt - kill.at} ms after a kill: ${attempt.error}` : `before any kill: ${attempt.error}`;
    }),
    [],
    'no connection started after a kill failed, nor any request before the first kill',
  );
  const killed = new Set(kills.map((kill) => kill.pid));
  t.notOk(
    load.attempts.some((attempt) => attempt.ok && killed.has(attempt.pid!) && attempt.startedAt > kills.find((kill) => kill.pid === attempt.pid)!.at),
    'no request started after a kill was answered by the killed worker',
  );
});
