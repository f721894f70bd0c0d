import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { IncompleteBodies, type IncompleteBodiesLimits } from '../../src/runtime/incomplete-bodies.js';
import { scaled } from '../helpers/wait.js';

/** A server fed connections the way a worker is (it never listens), answering once it has read the body. */
async function serve(limits: IncompleteBodiesLimits) {
  const bodies = new IncompleteBodies(limits);
  const server = http.createServer((request, response) => {
    // An app may refuse a request before reading its body (a key missing, a body announced too large).
    if (request.url === '/early') return void response.end('refused early');
    let length = 0;
    request.on('data', (chunk: Buffer) => (length += chunk.length));
    request.on('end', () => response.end(`read ${length}`));
  });
  bodies.track(server);
  const front = net.createServer((socket) => server.emit('connection', socket));
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const port = (front.address() as net.AddressInfo).port;
  return { bodies, port, close: () => new Promise((resolve) => front.close(resolve)) };
}

interface Client {
  socket: net.Socket;
  received: () => string;
  isClosed: () => boolean;
}

function open(port: number, localAddress: string): Promise<Client> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress });
    let received = '';
    let isClosed = false;
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (received += chunk));
    socket.on('error', () => {});
    socket.once('close', () => (isClosed = true));
    socket.once('connect', () => resolve({ socket, received: () => received, isClosed: () => isClosed }));
  });
}

/** Headers announcing a 10-byte body, and `sent` bytes of it. */
const post = (sent: number) => `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n${'x'.repeat(sent)}`;

const until = async (check: () => boolean, budgetMs = 5_000) => {
  const deadline = Date.now() + scaled(budgetMs);
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  return check();
};

const NO_TIMEOUT = 0;

t.test('a body sent with its headers is never tracked; one still arriving is, until it is complete', async (t) => {
  const { bodies, port, close } = await serve({ timeoutMs: NO_TIMEOUT, maxPerAddress: 1, exempt: () => false });
  t.teardown(close);
  const slow = await open(port, '127.0.0.1');
  slow.socket.write(post(3));
  t.ok(await until(() => bodies.count('127.0.0.1') === 1), 'a body still arriving holds a slot');
  // With a cap of 1, a tracked request from the same address would take the slow one's slot.
  const whole = await open(port, '127.0.0.1');
  whole.socket.write(post(10));
  t.ok(await until(() => whole.received().includes('read 10')), 'a body sent with its headers is answered');
  t.equal(bodies.count('127.0.0.1'), 1);
  t.notOk(slow.isClosed(), 'without taking a slot');
  slow.socket.write('x'.repeat(7));
  t.ok(await until(() => slow.received().includes('read 10')), 'the rest arrives: answered');
  t.ok(await until(() => bodies.count('127.0.0.1') === 0), 'and forgotten');
  // The next request of the same connection is tracked again, and a connection that goes is forgotten.
  slow.socket.write(post(1));
  t.ok(await until(() => bodies.count('127.0.0.1') === 1), 'the next slow body on the connection holds a slot');
  slow.socket.destroy();
  t.ok(await until(() => bodies.count('127.0.0.1') === 0), 'a closed connection is forgotten');
  whole.socket.destroy();
});

t.test('a body not complete within the timeout is answered 408 and its connection closed', async (t) => {
  const { bodies, port, close } = await serve({ timeoutMs: 200, maxPerAddress: 4, exempt: () => false });
  t.teardown(close);
  const slow = await open(port, '127.0.0.1');
  slow.socket.write(post(3));
  t.ok(await until(slow.isClosed), 'closed by the server');
  t.match(slow.received(), /^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*Connection: close[\s\S]*"code":"request_timeout","message":"the request body was not received in time"/);
  t.equal(bodies.count('127.0.0.1'), 0);
});

t.test('a request answered before its body arrived is closed at the timeout without a second answer', async (t) => {
  const { port, close } = await serve({ timeoutMs: 200, maxPerAddress: 4, exempt: () => false });
  t.teardown(close);
  const slow = await open(port, '127.0.0.1');
  slow.socket.write(post(3).replace('POST /', 'POST /early'));
  t.ok(await until(slow.isClosed), 'closed by the server');
  t.match(slow.received(), /^HTTP\/1\.1 200 OK\r\n[\s\S]*refused early$/, 'only the answer the app gave');
  t.notMatch(slow.received(), /408/);
});

t.test('past the cap, the oldest body still arriving from that address is answered 408 and closed', async (t) => {
  const { bodies, port, close } = await serve({ timeoutMs: NO_TIMEOUT, maxPerAddress: 2, exempt: () => false });
  t.teardown(close);
  const slowFrom = async (address: string, heldThen: number) => {
    const client = await open(port, address);
    client.socket.write(post(1));
    t.ok(await until(() => bodies.count(address) === heldThen), `${address} holds ${heldThen}`);
    return client;
  };
  const first = await slowFrom('127.0.0.1', 1);
  const second = await slowFrom('127.0.0.1', 2);
  const other = await slowFrom('127.0.0.4', 1);
  t.equal(bodies.count('127.0.0.1'), 2, 'another address does not count');
  const third = await open(port, '127.0.0.1');
  third.socket.write(post(1));
  t.ok(await until(first.isClosed), 'the oldest is closed');
  t.match(first.received(), /^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*"too many connections from this address are still sending their request body"/, 'with a 408');
  t.equal(bodies.count('127.0.0.1'), 2);
  t.notOk(second.isClosed() || third.isClosed() || other.isClosed(), 'the others stay');
  for (const client of [second, third, other]) client.socket.destroy();
});

t.test('exempt addresses (trusted proxies) and a cap of 0 are never capped', async (t) => {
  for (const limits of [{ maxPerAddress: 1, exempt: (address: string) => address === '127.0.0.1' }, { maxPerAddress: 0, exempt: () => false }]) {
    const { bodies, port, close } = await serve({ timeoutMs: NO_TIMEOUT, ...limits });
    const clients = [await open(port, '127.0.0.1'), await open(port, '127.0.0.1'), await open(port, '127.0.0.1')];
    // Node answers `100 Continue` as it hands the request over: then each is parsed with its body still to come.
    for (const client of clients) client.socket.write(`POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\nx`);
    t.ok(await until(() => clients.every((client) => client.received().includes('100 Continue'))), 'all three parsed');
    const later = await open(port, '127.0.0.9');
    later.socket.write(post(10));
    t.ok(await until(() => later.received().includes('read 10')), 'a later request was served meanwhile');
    t.ok(clients.every((client) => !client.isClosed() && !client.received().includes('408')), 'all three still open');
    t.equal(bodies.count('127.0.0.1'), 0, 'none counted');
    for (const client of clients) client.socket.write('x'.repeat(9));
    t.ok(await until(() => clients.every((client) => client.received().includes('read 10'))), 'all served');
    for (const client of [...clients, later]) client.socket.destroy();
    await close();
  }
});
