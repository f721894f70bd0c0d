import net from 'node:net';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { automationApp } from '../api/fixtures/app.js';
import { budgetText, scaled } from '../helpers/wait.js';

const fixture = await automationApp();
t.teardown(() => fixture.close());
const { app, acme } = fixture;
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as AddressInfo;

const MASK = [1, 2, 3, 4];
/** Frames `ws` refuses, each with its own protocol error. */
const BAD_FRAMES: Record<string, Buffer> = {
  WS_ERR_INVALID_OPCODE: Buffer.from([0x83, 0x80, ...MASK]),
  WS_ERR_EXPECTED_MASK: Buffer.from([0x81, 0x00]),
  WS_ERR_INVALID_UTF8: Buffer.from([0x81, 0x81, ...MASK, 0xff ^ MASK[0]!]),
  // Declares 2 MiB, over the 1 MiB limit: refused from the header alone.
  WS_ERR_UNSUPPORTED_MESSAGE_LENGTH: Buffer.from([0x82, 0xff, 0, 0, 0, 0, 0, 0x20, 0, 0, ...MASK]),
};

/** Opens a WebSocket by hand (no client library would send these frames), sends `frame`, resolves when the server closes the connection. */
function sendBadFrame(frame: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${budgetText(5_000)}`));
    }, scaled(5_000));
    let handshake = '';
    const onData = (chunk: Buffer) => {
      handshake += chunk.toString('latin1');
      if (!handshake.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (!handshake.startsWith('HTTP/1.1 101')) return reject(new Error(`not upgraded: ${handshake.slice(0, 40)}`));
      socket.resume();
      socket.write(frame);
    };
    socket.on('data', onData);
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.write(
      `GET /ws HTTP/1.1\r\nHost: ${acme.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
  });
}

t.test('a burst of WebSocket protocol errors: bounded warnings with the code, no stacks, nothing at error level', async (t) => {
  const kinds = Object.keys(BAD_FRAMES);
  for (const kind of kinds) await sendBadFrame(BAD_FRAMES[kind]!);
  const burst = Array.from({ length: 40 }, (_, i) => sendBadFrame(BAD_FRAMES[kinds[i % kinds.length]!]!));
  await Promise.all(burst);

  const lines = fixture.logs.flatMap((text) => text.split('\n').filter(Boolean)).map((line) => JSON.parse(line) as Record<string, unknown>);
  const warnings = lines.filter((line) => line.msg === 'websocket protocol error');
  t.equal(warnings.length, 10, '44 protocol errors, 10 lines in the window');
  t.same(warnings.slice(0, kinds.length).map((line) => line.code), kinds, 'each line names what the client got wrong');
  for (const line of warnings) {
    t.equal(line.level, 40, 'warn');
    t.type(line.reason, 'string');
    t.notOk(JSON.stringify(line).includes('    at '), 'no stack');
  }
  t.same(lines.filter((line) => (line.level as number) >= 50), [], 'nothing at error level');
  t.notOk(lines.some((line) => JSON.stringify(line).includes('"stack"')), 'no stack anywhere');
});
