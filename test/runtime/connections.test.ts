import t, { type Test } from 'tap';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { ConnectionTracker } from '../../src/runtime/connections.js';
import { scaled, until } from '../helpers/wait.js';

interface Answer {
  status: number;
  connection: string | undefined;
  body: string;
}

/**
 * A real HTTP server on loopback whose handler answers at once, or holds the response until the test
 * releases it; plus a keep-alive client with a single socket so requests reuse one connection.
 */
async function setup(t: Test) {
  const tracker = new ConnectionTracker();
  const held: Array<() => void> = [];
  const server = http.createServer((request, response) => {
    const answer = () => response.end(`hello ${request.url}`);
    if (request.url === '/hold') held.push(answer);
    else answer();
  });
  tracker.track(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(async () => {
    agent.destroy();
    tracker.destroyAll();
    await new Promise((resolve) => server.close(resolve));
  });
  const get = (path: string) =>
    new Promise<Answer>((resolve, reject) => {
      const request = http.get({ host: '127.0.0.1', port, path, agent }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, connection: response.headers.connection, body }));
      });
      request.on('error', reject);
    });
  /** Resolves once the handler holds `count` responses. */
  const heldResponses = async (count: number) => {
    await until(`${count} held responses`, () => (held.length >= count ? true : undefined), 10_000, { everyMs: 1 });
  };
  return { tracker, get, held, heldResponses, port };
}

t.test('connections are tracked while open', async (t) => {
  const { tracker, get } = await setup(t);
  t.equal(tracker.size, 0);
  const answer = await get('/a');
  t.equal(answer.connection, 'keep-alive');
  t.equal(tracker.size, 1, 'the idle keep-alive connection is still counted');
  t.equal(tracker.draining, false);
});

t.test('after beginClosing() responses carry Connection: close', async (t) => {
  const { tracker, get } = await setup(t);
  t.equal((await get('/before')).connection, 'keep-alive');
  tracker.beginClosing();
  t.equal(tracker.draining, true);
  const after = await get('/after');
  t.equal(after.body, 'hello /after', 'the request is still served');
  t.equal(after.connection, 'close');
});

t.test('a response in flight when closing begins is told Connection: close too', async (t) => {
  const { tracker, get, held, heldResponses } = await setup(t);
  const pending = get('/hold');
  await heldResponses(1);
  tracker.beginClosing();
  held[0]!();
  const answer = await pending;
  t.equal(answer.body, 'hello /hold');
  t.equal(answer.connection, 'close');
});

t.test('stopClosing() brings keep-alive back', async (t) => {
  const { tracker, get } = await setup(t);
  tracker.beginClosing();
  tracker.stopClosing();
  t.equal((await get('/again')).connection, 'keep-alive');
});

t.test('drain() closes idle connections and resolves true once they are gone', async (t) => {
  const { tracker, get } = await setup(t);
  await get('/a');
  t.equal(tracker.size, 1);
  t.equal(await tracker.drain(scaled(5_000), 0, 5), true);
  t.equal(tracker.size, 0);
});

t.test('drain() waits for a busy connection to finish its response, then resolves true', async (t) => {
  const { tracker, get, held, heldResponses } = await setup(t);
  const pending = get('/hold');
  await heldResponses(1);
  const drained = tracker.drain(scaled(5_000), 0, 5);
  held[0]!();
  t.equal((await pending).connection, 'close', 'the busy connection was told to close');
  t.equal(await drained, true);
  t.equal(tracker.size, 0);
});

t.test('drain() resolves false when a connection outlives the timeout', async (t) => {
  const { tracker, get, held, heldResponses } = await setup(t);
  const pending = get('/hold');
  await heldResponses(1);
  t.equal(await tracker.drain(20, 0, 5), false);
  t.equal(tracker.size, 1, 'the busy connection was not cut');
  held[0]!();
  t.equal((await pending).status, 200, 'and its response still completes');
});

/** Blocks this process's event loop, as CPU starvation or a long garbage collection does. */
function stall(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy: nothing else runs
  }
}

/**
 * A keep-alive client whose first request was answered: the socket is idle on the server and stays open. What
 * arrives after `received` was reset is the answer to the next request.
 */
async function idleKeepAliveClient(t: Test, port: number) {
  const socket = net.connect({ host: '127.0.0.1', port });
  t.teardown(() => socket.destroy());
  const client = { socket, received: '', closed: new Promise<void>((resolve) => socket.once('close', () => resolve())) };
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (client.received += chunk));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('GET /first HTTP/1.1\r\nHost: x\r\n\r\n');
  await until('the first answer', () => (client.received.includes('hello /first') ? true : undefined), 10_000, { everyMs: 1, last: () => client.received });
  client.received = '';
  return client;
}

/** The second request was answered whole, told `Connection: close`, and the drain then ended with no socket left. */
async function answeredThenClosed(t: Test, client: { received: string; closed: Promise<void> }, drained: Promise<boolean>): Promise<void> {
  await client.closed;
  t.match(client.received, /^HTTP\/1\.1 200 OK/, 'the request is answered before the connection closes');
  t.match(client.received, /connection: close/i, 'with Connection: close');
  t.match(client.received, /hello \/second$/);
  t.equal(await drained, true);
}

t.test('a request that reached an idle keep-alive socket while the process stalled is answered, not cut by the drain', async (t) => {
  const { tracker, port } = await setup(t);
  const client = await idleKeepAliveClient(t, port);
  const drained = tracker.drain(scaled(5_000), 100, 10);
  // The client's next request is written to the kernel at once, then this process stalls past the idle
  // threshold before it can read it: the socket looks idle by the clock, yet holds an unread request.
  client.socket.write('GET /second HTTP/1.1\r\nHost: x\r\n\r\n');
  stall(300);
  await answeredThenClosed(t, client, drained);
});

t.test('a request that reached an idle keep-alive socket just before an on-time drain poll is answered, not cut', async (t) => {
  const { tracker, port } = await setup(t);
  const client = await idleKeepAliveClient(t, port);
  // Any idle socket may close at the drain's polls, every 200 ms.
  const drained = tracker.drain(scaled(5_000), 0, 200);
  // After this turn's reads, the client's next request reaches the kernel and the process stays busy until the
  // poll is due: the poll comes on time, in the next turn's timers, before that turn reads the request.
  setImmediate(() => {
    client.socket.write('GET /second HTTP/1.1\r\nHost: x\r\n\r\n');
    stall(250);
  });
  await answeredThenClosed(t, client, drained);
});
