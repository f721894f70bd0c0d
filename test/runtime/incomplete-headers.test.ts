import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { IncompleteHeaders } from '../../src/runtime/incomplete-headers.js';

/** A server fed connections the way a worker is (it never listens): a plain listener emits them to it. */
async function serve(cap: IncompleteHeaders) {
  const server = http.createServer((_request, response) => response.end('ok'));
  cap.track(server);
  const front = net.createServer((socket) => server.emit('connection', socket));
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  return { port: (front.address() as net.AddressInfo).port, close: () => new Promise((resolve) => front.close(resolve)) };
}

function open(port: number, localAddress: string): Promise<{ socket: net.Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress });
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (received += chunk));
    socket.on('error', () => {});
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.once('connect', () => resolve({ socket, received: () => received, closed }));
  });
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
};

t.test('past the cap, the oldest incomplete connection of that address is answered 408 and closed', async (t) => {
  const cap = new IncompleteHeaders({ maxPerAddress: 2, exempt: () => false });
  const { port, close } = await serve(cap);
  t.teardown(close);
  const [first, second] = [await open(port, '127.0.0.1'), await open(port, '127.0.0.1')];
  await until(() => cap.count('127.0.0.1') === 2);
  const other = await open(port, '127.0.0.4');
  await until(() => cap.count('127.0.0.4') === 1);
  t.equal(cap.count('127.0.0.1'), 2, 'another address does not count');
  const third = await open(port, '127.0.0.1');
  await first.closed;
  t.match(first.received(), /^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*"code":"request_timeout"/);
  t.equal(cap.count('127.0.0.1'), 2);
  // A connection that completes its headers leaves the count.
  second.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  await until(() => second.received().includes('ok'));
  t.equal(cap.count('127.0.0.1'), 1, 'headers complete: no longer counted');
  third.socket.destroy();
  await until(() => cap.count('127.0.0.1') === 0);
  t.equal(cap.count('127.0.0.1'), 0, 'a closed connection is forgotten');
  for (const client of [second, other]) client.socket.destroy();
});

t.test('exempt addresses (trusted proxies) and a cap of 0 are never capped', async (t) => {
  const exempt = new IncompleteHeaders({ maxPerAddress: 1, exempt: (address) => address === '127.0.0.1' });
  const off = new IncompleteHeaders({ maxPerAddress: 0, exempt: () => false });
  for (const cap of [exempt, off]) {
    const { port, close } = await serve(cap);
    const clients = [await open(port, '127.0.0.1'), await open(port, '127.0.0.1'), await open(port, '127.0.0.1')];
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.ok(clients.every((client) => !client.socket.destroyed && client.received() === ''), 'all still open');
    t.equal(cap.count('127.0.0.1'), 0);
    for (const client of clients) client.socket.destroy();
    await close();
  }
});
