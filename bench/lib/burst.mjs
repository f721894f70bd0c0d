// Clients of the failed-authentication burst (bench/authorize.mjs): a legitimate client that sends one request
// at a time on one keep-alive connection and records its latency, and an attacker that sends a fixed number of
// requests with wrong keys over several keep-alive connections. Both may pick their source address
// (`localAddress`, any 127.0.0.0/8 address on Linux), so each round can start from a fresh address.
// With BENCH_BURST_ROLE=attacker this file is the attacker's own process (a `Fixture`, command `burst`), so
// that answering the attacker never delays the legitimate client's event loop.
import { createHistogram } from 'node:perf_hooks';
import { Client, Pool } from 'undici';

const ms = (ns) => Math.round((ns / 1e6) * 1000) / 1000;

/**
 * Requests with `headers`, one at a time, one every `intervalMs` (or at once after the previous answer when 0),
 * until `count` are done or `until()` is true; only answers with status `expect` are timed. Resolves with the
 * latency percentiles and every status seen.
 */
export async function legitimateClient({ origin, localAddress, path, body, headers, count = Infinity, until = () => false, intervalMs = 0, expect = 200 }) {
  const client = new Client(origin, { localAddress, keepAliveTimeout: 30_000, pipelining: 1 });
  const histogram = createHistogram();
  const statuses = {};
  let sent = 0;
  const firstAt = performance.now();
  try {
    while (sent < count && !until()) {
      const due = firstAt + sent * intervalMs;
      if (intervalMs > 0 && performance.now() < due) await new Promise((resolve) => setTimeout(resolve, due - performance.now()));
      const started = process.hrtime.bigint();
      const response = await client.request({ path, method: 'POST', headers, body });
      await response.body.text();
      const latencyNs = process.hrtime.bigint() - started;
      sent++;
      statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
      if (response.statusCode === expect) histogram.record(Math.max(1, Number(latencyNs)));
    }
  } finally {
    await client.close();
  }
  return { sent, timed: histogram.count, p50Ms: ms(histogram.percentile(50)), p95Ms: ms(histogram.percentile(95)), elapsedMs: performance.now() - firstAt, statuses };
}

/**
 * `total` requests, each with the key `makeKey()` returns, `connections` in flight at a time. Resolves with
 * the statuses, how many carried `Retry-After`, and how long the burst took.
 */
export async function wrongKeyBurst({ origin, localAddress, path, body, total, connections, makeKey }) {
  const pool = new Pool(origin, { localAddress, connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const statuses = {};
  let retryAfter = 0;
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < total) {
      next++;
      const response = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${makeKey()}` }, body });
      await response.body.text();
      statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
      if (response.headers['retry-after'] !== undefined) retryAfter++;
    }
  };
  try {
    await Promise.all(Array.from({ length: connections }, worker));
  } finally {
    await pool.close();
  }
  return { statuses, retryAfter, elapsedMs: Math.round(performance.now() - started) };
}

if (process.env.BENCH_BURST_ROLE === 'attacker') {
  const { emit, exitWithParent, onCommands } = await import('../fixtures/protocol.mjs');
  const { generateKey } = await import('../../dist/src/auth/keys.js');
  exitWithParent(() => undefined);
  onCommands(async (command) => {
    if (command.cmd !== 'burst') throw new Error(`unknown command ${command.cmd}`);
    return wrongKeyBurst({ ...command.options, makeKey: () => generateKey().key });
  });
  emit({ type: 'ready', pid: process.pid });
}
