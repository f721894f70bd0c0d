import net from 'node:net';
import http from 'node:http';
import t from 'tap';
import { ServerProcess } from '../helpers/server-process.js';
import { killOnExit } from './cleanup.js';

// Slow clients (slowloris): connections that drip their request headers a byte at a time. Each is answered 408
// once `http.headersTimeoutMs` passes, one address holds at most `http.maxIncompletePerAddress` of them per
// worker (past it the oldest goes first), and probes from elsewhere keep being answered meanwhile.

const HEADERS_TIMEOUT_MS = 3_000;
const CAP = 10;
const WORKERS = 2;
const SLOW = 60;

interface Slow {
  socket: net.Socket;
  received: string;
  closed: boolean;
}

/** A connection from 127.0.0.1 that sends a request head one byte every 500 ms and never finishes it. */
function slowClient(port: number): Promise<Slow> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.1' });
    const slow: Slow = { socket, received: '', closed: false };
    const head = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: ' + 'x'.repeat(200);
    let sent = 0;
    const drip = setInterval(() => {
      if (socket.destroyed || socket.writableEnded) return clearInterval(drip);
      socket.write(head[sent % head.length]!);
      sent++;
    }, 500);
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (slow.received += chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      slow.closed = true;
      clearInterval(drip);
    });
    socket.once('connect', () => resolve(slow));
    socket.once('error', reject);
  });
}

/** `GET /healthz` from another address (127.0.0.2) on a fresh connection. */
function probe(port: number): Promise<{ status: number; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/healthz', localAddress: '127.0.0.2', agent: false, timeout: 20_000 }, (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode!, ms: Date.now() - started }));
    });
    request.on('timeout', () => request.destroy(new Error('probe timed out')));
    request.on('error', reject);
  });
}

const until = async (check: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs;
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return check();
};

t.test('slow clients are answered 408 after the headers timeout, capped per address, while probes are served', async (t) => {
  const server = await ServerProcess.start({ workers: WORKERS, http: { port: 0, host: '127.0.0.1', headersTimeoutMs: HEADERS_TIMEOUT_MS, maxIncompletePerAddress: CAP } });
  killOnExit(server.child.pid);
  t.teardown(() => server.stop());
  await server.readyWorkers(WORKERS, 0, 60_000);

  let probing = true;
  const probes: Array<{ status: number; ms: number } | Error> = [];
  const prober = (async () => {
    while (probing) {
      probes.push(await probe(server.port).catch((error: Error) => error));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();

  const slow = await Promise.all(Array.from({ length: SLOW }, () => slowClient(server.port)));
  // A client slower than most, yet within the timeout, is served as usual.
  const patient = await new Promise<string>((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: server.port, localAddress: '127.0.0.3' });
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      answer += chunk;
      if (answer.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.write('GET /healthz HTTP/1.1\r\n');
    setTimeout(() => socket.write('Host: localhost\r\n'), HEADERS_TIMEOUT_MS / 3);
    setTimeout(() => socket.write('Connection: close\r\n\r\n'), (HEADERS_TIMEOUT_MS * 2) / 3);
  });

  const allClosed = await until(() => slow.every((client) => client.closed), HEADERS_TIMEOUT_MS + 30_000);
  probing = false;
  await prober;

  t.ok(allClosed, `every slow connection was closed (${slow.filter((client) => client.closed).length} of ${SLOW})`);
  const answered408 = slow.filter((client) => client.received.startsWith('HTTP/1.1 408 '));
  t.equal(answered408.length, SLOW, 'each with a 408 answer');
  const evicted = slow.filter((client) => client.received.includes('too many connections from this address'));
  const timedOut = slow.filter((client) => client.received.includes('"code":"request_timeout"') && !client.received.includes('too many connections'));
  t.equal(evicted.length, SLOW - WORKERS * CAP, `past ${CAP} per worker, the oldest were closed at once`);
  t.equal(timedOut.length, WORKERS * CAP, 'the rest when the headers timeout passed');
  for (const client of answered408.slice(0, 1)) t.match(client.received, /Connection: close/i);

  t.match(patient, /^HTTP\/1\.1 200 /, 'a slow client within the timeout is served');

  const answers = probes.filter((entry): entry is { status: number; ms: number } => !(entry instanceof Error));
  t.same(probes.filter((entry) => entry instanceof Error).map(String), [], 'no probe failed');
  t.ok(answers.length > 0 && answers.every((answer) => answer.status === 200), `every probe answered 200 (${answers.length})`);
  const times = answers.map((answer) => answer.ms).sort((a, b) => a - b);
  t.comment(`/healthz during the attack: ${answers.length} probes, p50 ${times[times.length >> 1]} ms, p95 ${times[Math.floor(times.length * 0.95)]} ms`);
});
