import t from 'tap';
import { describeReplies, describeResult, formatDuration } from '../../cli/replies.js';
import type { RequestResult } from '../../src/ipc/handlers.js';

const MiB = 1024 * 1024;
const NOW = Date.parse('2026-05-04T10:00:00Z');

t.test('ctl status: a table, a row per process, memory in MiB and uptime in seconds', async (t) => {
  const result: RequestResult = {
    id: 'x',
    replies: [
      { server: 'node-a', worker: 2, ok: true, result: { server: 'node-a', worker: 2, pid: 12, status: 'ready', uptimeMs: 7_498, connections: 3, rssBytes: 86 * MiB } },
      { server: 'node-a', worker: 0, ok: true, result: { server: 'node-a', worker: 0, pid: 10, status: 'ready', uptimeMs: 7_885, connections: 0, rssBytes: 74 * MiB, version: '0.1.0', startedAt: '2026-05-04T09:59:52.383Z' } },
      { server: 'node-a', worker: 1, ok: false, error: { code: 'handler_failed', message: 'boom' } },
    ],
    missing: [{ server: 'node-b' }],
  };
  const [header, ...rows] = describeReplies('status', result, NOW).split('\n');
  t.match(header, /^SERVER +PROCESS +PID +STATE +VERSION +STARTED +UPTIME +CONNECTIONS +RSS$/);
  t.same(
    rows.map((row) => row.trim().split(/ {2,}/)),
    [
      ['node-a', 'primary', '10', 'ready', '0.1.0', '2026-05-04T09:59:52Z', '8 s', '0', '74 MiB'],
      ['node-a', 'worker 1', '-', 'error: handler_failed', '-', '-', '-', '-', '-'],
      ['node-a', 'worker 2', '12', 'ready', '-', '-', '7 s', '3', '86 MiB'],
      ['node-b', '-', '-', 'no answer', '-', '-', '-', '-', '-'],
    ],
  );
  t.notMatch(describeReplies('status', result, NOW), /[{}]/, 'no JSON');
});

t.test('ctl scale status: a row per server, durations in seconds and minutes, not a 600-character JSON line', async (t) => {
  const status = {
    serverId: 'node-a',
    paused: false,
    deciding: true,
    lease: { owner: 'node-a', term: 3, expiresAt: new Date(NOW + 25_000).toISOString() },
    policy: { minClusterSize: 1, maxClusterSize: 3, cpu: { scaleOutAbove: 75, scaleInBelow: 25 }, memory: { scaleOutAbove: 80, scaleInBelow: 40 }, windowMs: 60_000, cooldownMs: 300_000, decommissionStrategy: 'newest', paused: false },
    lastDecision: { action: 'none', reason: 'within bounds', current: 2, desired: 2 },
    lastAction: { action: 'scale-out', reason: 'cpu', serverId: 'node-c', at: NOW - 90_000, outcome: 'done' },
    samples: 12,
    evaluations: 40,
  };
  const text = describeReplies('autoscaler.status', { id: 'x', replies: [{ server: 'node-a', worker: 0, ok: true, result: status }], missing: [] }, NOW);
  const [header, row, ...rest] = text.split('\n');
  t.match(header, /^SERVER +DECIDES +PAUSED +SIZE +DESIRED +LAST DECISION +LAST ACTION +LEASE +POLICY$/);
  t.same(row!.split(/ {2,}/), ['node-a', 'yes', 'no', '2', '2', 'none (within bounds)', 'scale-out node-c: done, 90 s ago', 'node-a (25 s left)', '1–3 servers, window 60 s, cooldown 5 min']);
  t.same(rest, [], 'one row per server');
  t.ok(text.length < 400, `${text.length} characters`);
});

t.test('ctl scale status where the autoscaler is off: the one error line', async (t) => {
  const text = describeReplies('autoscaler.status', { id: 'x', replies: [{ server: 'node-a', worker: 0, ok: false, error: { code: 'disabled', message: 'autoscaler.status: the autoscaler is off on this server' } }], missing: [] });
  t.equal(text, 'node-a primary: error disabled: autoscaler.status: the autoscaler is off on this server');
});

t.test('a worker that does not exist is said so, once, not "no answer"', async (t) => {
  const result: RequestResult = {
    id: 'x',
    replies: [{ server: 'node-a', worker: 1, ok: true, result: { worker: 1, status: 'cordoned' } }],
    missing: [{ server: 'node-a', worker: 9 }, { server: 'node-a', worker: 2 }],
    unknownWorkers: [{ server: 'node-a', worker: 9, message: 'no such worker: 9 (this server has workers 1, 2)' }],
  };
  t.equal(describeReplies('cordon', result), ['node-a worker 1: worker=1 status=cordoned', 'node-a: no such worker: 9 (this server has workers 1, 2)', 'node-a worker 2: no answer'].join('\n'));
  const table = describeReplies('status', { ...result, replies: [{ server: 'node-a', worker: 1, ok: true, result: { server: 'node-a', worker: 1, pid: 5, status: 'ready', uptimeMs: 1_000, connections: 0 } }] });
  t.match(table, /\nnode-a +worker 2 +- +no answer/);
  t.notMatch(table, /worker 9 .*no answer/);
  t.match(table, /\nnode-a: no such worker: 9 \(this server has workers 1, 2\)$/);
});

t.test('other results read as key=value; what nests stays JSON', async (t) => {
  t.equal(describeResult({ worker: 1, status: 'cordoned' }), 'worker=1 status=cordoned');
  t.equal(describeResult({ command: 'reboot', accepted: true, note: 'two words' }), 'command=reboot accepted=true note="two words"');
  t.equal(describeResult({ reservations: [{ server_id: 'n1' }] }), 'reservations=[{"server_id":"n1"}]');
  t.equal(describeResult(null), 'null');
  t.equal(describeResult(['a']), '["a"]');
});

t.test('a cordon accepted until the readiness grace ends says so in words', async (t) => {
  t.equal(describeResult({ accepted: true, effectiveInMs: 5000 }), 'accepted: takes effect after the readiness grace (5 s)');
  t.equal(describeResult({ accepted: true, effectiveInMs: 5000, worker: 1, status: 'ready' }), 'accepted: takes effect after the readiness grace (5 s)');
  t.equal(describeResult({ command: 'reboot', accepted: true }), 'command=reboot accepted=true', 'another accepted reply keeps its fields');
});

t.test('durations a person reads at a glance', async (t) => {
  t.equal(formatDuration(7_498), '7 s');
  t.equal(formatDuration(300_000), '5 min');
  t.equal(formatDuration(3 * 3_600_000), '3.0 h');
  t.equal(formatDuration(-5), '0 s');
});
