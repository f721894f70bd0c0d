import type { Test } from 'tap';
import WebSocket from 'ws';
import { until } from './wait.js';

/**
 * A WebSocket to `/ws` as a tenant's client holds one: `ask(frame)` sends an envelope and resolves with the
 * reply carrying its `requestId`. Closed when the test ends.
 */
export async function envelopeSocket(t: Test, url: string, headers: Record<string, string>): Promise<{ socket: WebSocket; ask(frame: Record<string, unknown>): Promise<any> }> {
  const socket = new WebSocket(url, { headers, perMessageDeflate: false });
  t.teardown(() => socket.terminate());
  const frames: any[] = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  return {
    socket,
    ask(frame) {
      socket.send(JSON.stringify(frame));
      return until(`the reply to ${String(frame.requestId)}`, () => frames.find((reply) => reply.id === frame.requestId), 10_000, { everyMs: 5 });
    },
  };
}
