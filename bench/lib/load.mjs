// Small HTTP/1.1 clients on raw sockets, for what autocannon cannot measure: latency with a new connection per
// request (read until the server closes), and failed requests under steady load, classified by error type.
import net from 'node:net';
import { createHistogram } from 'node:perf_hooks';

const wallNow = () => performance.timeOrigin + performance.now();
const HEADER_END = Buffer.from('\r\n\r\n');

/** Incremental parse of one response: status, keep-alive and, when complete, the body. */
function parseResponse(buffer) {
  const end = buffer.indexOf(HEADER_END);
  if (end < 0) return undefined;
  const head = buffer.subarray(0, end).toString('latin1');
  const status = Number(head.slice(9, 12));
  const lengthMatch = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  const length = lengthMatch ? Number(lengthMatch[1]) : 0;
  const bodyStart = end + 4;
  if (buffer.length < bodyStart + length) return { complete: false };
  const body = buffer.subarray(bodyStart, bodyStart + length).toString('utf8');
  const workerMatch = /"worker":(\d+)/.exec(body);
  return {
    complete: true,
    status,
    close: /\r\nconnection:\s*close/i.test(head),
    worker: workerMatch ? Number(workerMatch[1]) : undefined,
    consumed: bodyStart + length,
  };
}

export function requestBuffer(host, port, path, close) {
  return Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nAccept: application/json\r\n${close ? 'Connection: close\r\n' : ''}\r\n`);
}

/**
 * One request on a new connection; resolves when the server has closed it (or on error / timeout).
 * `latencyNs` runs from connect() to the complete response.
 */
export function requestOnNewConnection({ host, port, request, timeoutMs = 5_000 }) {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint();
    let buffer = Buffer.alloc(0);
    let response;
    let latencyNs;
    let errorCode;
    let settled = false;
    const socket = net.connect({ host, port, noDelay: true });
    const finish = (timedOut) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (response?.complete) resolve({ ok: true, status: response.status, worker: response.worker, latencyNs });
      else resolve({ ok: false, type: timedOut ? 'timeout' : (errorCode ?? 'closed-before-response'), reused: false });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk) => {
      if (response?.complete) return;
      buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
      response = parseResponse(buffer);
      if (response?.complete) latencyNs = process.hrtime.bigint() - started;
    });
    socket.on('error', (error) => {
      errorCode ??= error.code ?? error.message;
    });
    socket.on('close', () => finish(false));
  });
}

/** Per-socket state of the keep-alive client (net.Socket has its own `pending`). */
const state = new WeakMap();

/** A keep-alive connection that reconnects when the server closed it; one request at a time. */
class KeepAliveConnection {
  constructor(host, port, request, timeoutMs) {
    Object.assign(this, { host, port, request, timeoutMs });
    this.socket = undefined;
    this.served = 0;
  }

  send() {
    return new Promise((resolve) => {
      const started = process.hrtime.bigint();
      const reused = this.socket !== undefined;
      if (!this.socket) {
        this.socket = net.connect({ host: this.host, port: this.port, noDelay: true });
        this.served = 0;
        const socket = this.socket;
        state.set(socket, {});
        socket.on('error', (error) => {
          state.get(socket).errorCode ??= error.code ?? error.message;
        });
        socket.on('close', () => {
          if (this.socket === socket) this.socket = undefined;
          state.get(socket)?.pending?.();
        });
        socket.on('data', (chunk) => state.get(socket)?.onData?.(chunk));
      }
      const socket = this.socket;
      const slot = state.get(socket);
      let buffer = Buffer.alloc(0);
      let settled = false;
      const settle = (result) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        slot.pending = undefined;
        slot.onData = undefined;
        resolve(result);
      };
      const timer = setTimeout(() => {
        socket.destroy();
        settle({ ok: false, type: 'timeout', reused });
      }, this.timeoutMs);
      slot.pending = () => settle({ ok: false, type: slot.errorCode ?? 'closed-before-response', reused });
      slot.onData = (chunk) => {
        buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
        const response = parseResponse(buffer);
        if (!response?.complete) return;
        this.served++;
        if (response.close) {
          // The server says this connection is done: never reuse it.
          if (this.socket === socket) this.socket = undefined;
          slot.pending = undefined;
          socket.end();
        }
        settle({ ok: true, status: response.status, worker: response.worker, latencyNs: process.hrtime.bigint() - started, reused });
      };
      socket.write(this.request);
    });
  }

  close() {
    this.socket?.destroy();
    this.socket = undefined;
  }
}

function summarizeHistogram(histogram) {
  if (histogram.count === 0) return { p50Ms: null, p99Ms: null, maxMs: null };
  const ms = (ns) => Math.round((ns / 1e6) * 1000) / 1000;
  return { p50Ms: ms(histogram.percentile(50)), p99Ms: ms(histogram.percentile(99)), maxMs: ms(histogram.max) };
}

/**
 * Closed loop, `concurrency` loops each opening one connection per request, for `durationMs`.
 * Returns req/s, latency percentiles, statuses, errors and how the answers spread over workers.
 */
export async function newConnectionLoop({ host = '127.0.0.1', port, path, concurrency = 16, durationMs = 3_000, expectStatus = 200 }) {
  const request = requestBuffer(host, port, path, true);
  const histogram = createHistogram();
  const statuses = {};
  const errors = {};
  const workers = {};
  let ok = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const loop = async () => {
    while (performance.now() < deadline) {
      const result = await requestOnNewConnection({ host, port, request });
      if (!result.ok) {
        errors[result.type] = (errors[result.type] ?? 0) + 1;
        continue;
      }
      statuses[result.status] = (statuses[result.status] ?? 0) + 1;
      if (result.worker !== undefined) workers[result.worker] = (workers[result.worker] ?? 0) + 1;
      if (result.status === expectStatus) {
        ok++;
        histogram.record(Math.max(1, Number(result.latencyNs)));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsedS = (performance.now() - started) / 1000;
  return { reqPerSec: Math.round(ok / elapsedS), ok, elapsedS: Math.round(elapsedS * 100) / 100, ...summarizeHistogram(histogram), statuses, errors, workers };
}

/**
 * Steady paced load: `keepAlive` connections and `newConnection` loops, each at `ratePerLoop` req/s, until
 * `stop()` is called. Any connection error, reset, close before the response, timeout or non-2xx status is a
 * failed request, recorded with its time and type. `stop()` waits for requests in flight.
 */
export function steadyLoad({ host = '127.0.0.1', port, path, keepAlive = 8, newConnection = 8, ratePerLoop = 250, timeoutMs = 3_000 }) {
  const failures = [];
  const counts = { ka: { ok: 0, failed: 0 }, nc: { ok: 0, failed: 0 } };
  const histograms = { ka: createHistogram(), nc: createHistogram() };
  const bucketsMs = 250;
  const timeline = new Map();
  const startedAt = wallNow();
  let stopping = false;
  const intervalMs = 1000 / ratePerLoop;

  const record = (kind, result, at, sentAt) => {
    const bucket = Math.floor((at - startedAt) / bucketsMs);
    const slot = timeline.get(bucket) ?? { ok: 0, failed: 0 };
    timeline.set(bucket, slot);
    const good = result.ok && result.status >= 200 && result.status < 300;
    if (good) {
      counts[kind].ok++;
      slot.ok++;
      histograms[kind].record(Math.max(1, Number(result.latencyNs)));
    } else {
      counts[kind].failed++;
      slot.failed++;
      failures.push({ t: at, sentAt, kind, type: result.ok ? `http-${result.status}` : result.type, reused: result.reused ?? false });
    }
  };

  const paced = async (kind, send) => {
    const loopStart = performance.now() + Math.random() * intervalMs;
    let n = 0;
    while (!stopping) {
      const due = loopStart + n * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (stopping) break;
      n++;
      const sentAt = wallNow();
      const result = await send();
      record(kind, result, wallNow(), sentAt);
      // Fell far behind (server stalled): do not fire a burst to catch up.
      if (performance.now() - (loopStart + n * intervalMs) > 50) n = Math.ceil((performance.now() - loopStart) / intervalMs);
    }
  };

  const kaRequest = requestBuffer(host, port, path, false);
  const ncRequest = requestBuffer(host, port, path, true);
  const connections = Array.from({ length: keepAlive }, () => new KeepAliveConnection(host, port, kaRequest, timeoutMs));
  const loops = [
    ...connections.map((connection) => paced('ka', () => connection.send())),
    ...Array.from({ length: newConnection }, () => paced('nc', () => requestOnNewConnection({ host, port, request: ncRequest, timeoutMs }))),
  ];

  return {
    startedAt,
    async stop() {
      stopping = true;
      await Promise.all(loops);
      for (const connection of connections) connection.close();
      const endedAt = wallNow();
      const byType = {};
      for (const failure of failures) {
        const key = `${failure.kind}:${failure.type}${failure.reused ? ' (reused socket)' : ''}`;
        byType[key] = (byType[key] ?? 0) + 1;
      }
      return {
        startedAt,
        durationS: Math.round((endedAt - startedAt) / 10) / 100,
        offeredReqPerSec: Math.round((keepAlive + newConnection) * ratePerLoop),
        counts,
        failed: failures.length,
        failuresByType: byType,
        failures,
        latency: { keepAlive: summarizeHistogram(histograms.ka), newConnection: summarizeHistogram(histograms.nc) },
        timeline: [...timeline.entries()].sort((x, y) => x[0] - y[0]).map(([bucket, slot]) => ({ atMs: bucket * bucketsMs, ...slot })),
        endedAt,
      };
    },
  };
}

/** An HTTP/1.1 POST with a JSON body, as raw bytes for the keep-alive client. */
export function postBuffer(host, port, path, headers, body) {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return Buffer.from(`POST ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\n${lines}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

/**
 * Evenly paced keep-alive load: `connections` connections, each sending one request every
 * `connections / rate` seconds, their start times spread over one interval, so the server sees one request
 * every `1 / rate` seconds rather than each second's quota in a burst. A connection whose answer comes late
 * sends its next request at once. Latency runs from each request's write to its complete answer.
 */
export async function pacedLoad({ host = '127.0.0.1', port, request, connections = 32, rate, durationMs = 3_000, timeoutMs = 5_000, expectStatus = 200 }) {
  const histogram = createHistogram();
  const intervalMs = (connections * 1000) / rate;
  let ok = 0;
  let failed = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const loop = async (index) => {
    const connection = new KeepAliveConnection(host, port, request, timeoutMs);
    let next = started + (index * intervalMs) / connections;
    while (next < deadline) {
      const wait = next - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const result = await connection.send();
      if (result.ok && result.status === expectStatus) {
        ok++;
        histogram.record(Math.max(1, Number(result.latencyNs)));
      } else failed++;
      next += intervalMs;
    }
    connection.close();
  };
  await Promise.all(Array.from({ length: connections }, (_, index) => loop(index)));
  const elapsedS = (performance.now() - started) / 1000;
  return { requests: ok + failed, ok, failed, requestsPerSecond: Math.round(ok / elapsedS), ...summarizeHistogram(histogram) };
}

/**
 * Closed loop over keep-alive connections: each sends its next request as soon as the answer is in, for
 * `durationMs`; `request()` gives each request's bytes, so that the body can vary (another id every time). Latency
 * runs from each request's write to its complete answer; an answer other than `expectStatus` counts as failed.
 */
export async function closedLoop({ host = '127.0.0.1', port, request, connections = 16, durationMs = 3_000, timeoutMs = 5_000, expectStatus = 200 }) {
  const histogram = createHistogram();
  const statuses = {};
  let ok = 0;
  let failed = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const loop = async () => {
    const connection = new KeepAliveConnection(host, port, undefined, timeoutMs);
    while (performance.now() < deadline) {
      connection.request = request();
      const result = await connection.send();
      if (result.ok) statuses[result.status] = (statuses[result.status] ?? 0) + 1;
      if (result.ok && result.status === expectStatus) {
        ok++;
        histogram.record(Math.max(1, Number(result.latencyNs)));
      } else failed++;
    }
    connection.close();
  };
  await Promise.all(Array.from({ length: connections }, loop));
  const elapsedS = (performance.now() - started) / 1000;
  return { requests: ok + failed, ok, failed, statuses, requestsPerSecond: Math.round(ok / elapsedS), ...summarizeHistogram(histogram) };
}
