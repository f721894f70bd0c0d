import net from 'node:net';
import http from 'node:http';
import t from 'tap';
import { ServerProcess } from '../helpers/server-process.js';
import { scaled } from '../helpers/wait.js';
import { killOnExit } from './cleanup.js';

// Slow request bodies: headers sent at once, then the body a byte at a time to an envelope route. A request
// whose body is not complete `http.bodyTimeoutMs` after its headers is answered 408 and its connection closed,
// and one address holds at most `http.maxIncompletePerAddress` such requests per worker (past it the oldest goes).

const BODY_TIMEOUT_MS = scaled(3_000);
const CAP = 3;

interface Slow {
  socket: net.Socket;
  received: string;
  closed: boolean;
}

/**
 * A `POST /crud` from `localAddress` announcing a 200-byte JSON body, then sending one byte of it every 300 ms
 * (never all of it). With `expectContinue`, resolves once Node answered `100 Continue`: the request is parsed.
 */
function slowBody(port: number, localAddress: string, expectContinue = false): Promise<Slow> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress });
    const slow: Slow = { socket, received: '', closed: false };
    const expect = expectContinue ? 'Expect: 100-continue\r\n' : '';
    const drip = setInterval(() => {
      if (socket.destroyed || socket.writableEnded) return clearInterval(drip);
      socket.write(' ');
    }, 300);
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      slow.received += chunk;
      if (slow.received.includes('100 Continue')) resolve(slow);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      slow.closed = true;
      clearInterval(drip);
    });
    socket.once('connect', () => {
      socket.write(`POST /crud HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200\r\n${expect}\r\n{`);
      if (!expectContinue) resolve(slow);
    });
    socket.once('error', reject);
  });
}

const until = async (check: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs;
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return check();
};

/** The answer to a `POST /crud` whose body comes in two parts `gapMs` apart. */
function patientPost(port: number, gapMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.3' });
    const body = JSON.stringify({ method: 'object.read', collection: 'apis' });
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (answer += chunk));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.write(`POST /crud HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
    socket.write(body.slice(0, 10));
    setTimeout(() => socket.write(body.slice(10)), gapMs);
    setTimeout(() => socket.destroy(), scaled(20_000)).unref();
  });
}

function probe(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/healthz', localAddress: '127.0.0.4', agent: false, timeout: scaled(10_000) }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode!));
    });
    request.on('timeout', () => request.destroy(new Error('probe timed out')));
    request.on('error', reject);
  });
}

const server = await ServerProcess.start({ workers: 1, http: { port: 0, host: '127.0.0.1', bodyTimeoutMs: BODY_TIMEOUT_MS, maxIncompletePerAddress: CAP } });
killOnExit(server.child.pid);
t.teardown(() => server.stop());
await server.readyWorkers(1, 0, 60_000);

t.test('a body not complete within http.bodyTimeoutMs is answered 408 and its connection closed', async (t) => {
  const slow = await slowBody(server.port, '127.0.0.1');
  t.teardown(() => slow.socket.destroy());
  const patient = await patientPost(server.port, BODY_TIMEOUT_MS / 3);
  // Authorization reads the envelope, so its refusal (no key here) is an answer given once the body arrived.
  t.match(patient, /^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*"code":"forbidden"/, 'a body that arrives within the timeout, in two parts, reaches the route');

  t.ok(await until(() => slow.closed, BODY_TIMEOUT_MS + scaled(20_000)), 'the slow connection was closed');
  t.match(slow.received, /^HTTP\/1\.1 408 Request Timeout\r\n/);
  t.match(slow.received, /Connection: close/i);
  t.match(slow.received, /"code":"request_timeout","message":"the request body was not received in time"/);
});

t.test('past http.maxIncompletePerAddress bodies arriving from one address, the oldest are answered 408 and closed', async (t) => {
  const slow: Slow[] = [];
  t.teardown(() => slow.forEach((client) => client.socket.destroy()));
  // One after the other: each is parsed (Node answered `100 Continue`) before the next connects.
  for (let i = 0; i < CAP + 2; i++) slow.push(await slowBody(server.port, '127.0.0.2', true));
  t.equal(await probe(server.port), 200, 'another address is served meanwhile');

  t.ok(await until(() => slow.every((client) => client.closed), BODY_TIMEOUT_MS + scaled(20_000)), 'every slow connection was closed');
  const evicted = slow.map((client) => client.received.includes('too many connections from this address are still sending their request body'));
  const timedOut = slow.map((client) => client.received.includes('the request body was not received in time'));
  t.same(evicted, [true, true, false, false, false], `past ${CAP}, the two oldest were closed`);
  t.same(timedOut, [false, false, true, true, true], 'the rest when the body timeout passed');
  for (const client of slow) t.match(client.received, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 408 Request Timeout\r\n/);
});
