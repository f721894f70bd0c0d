import t from 'tap';
import { createLogger } from '../../src/logging/logger.js';
import { prettyLine, resolveLogFormat } from '../../src/logging/pretty.js';

function capture(format: 'json' | 'pretty', base: Record<string, unknown> = { server: 'node-a', worker: 0 }, level = 'info') {
  const lines: string[] = [];
  const log = createLogger({ level, base, format, destination: { write: (chunk: string) => void lines.push(chunk) } });
  return { log, lines };
}

const HEAD = /^\d\d:\d\d:\d\d\.\d{3} /;

t.test('pretty: time, level, where, message, then the fields of the event', async (t) => {
  const { log, lines } = capture('pretty');
  log.info({ ports: { http: 8080 }, workers: 2, dataDir: '/srv/data dir' }, 'fleetplane started');
  t.equal(lines.length, 1);
  const [line] = lines;
  t.match(line, HEAD, 'the local time first');
  t.equal(line!.replace(HEAD, ''), 'INFO  node-a/primary  fleetplane started  ports={"http":8080} workers=2 dataDir="/srv/data dir"\n');
  t.notMatch(line, /"level"|"pid"|"hostname"|"name"/, 'no JSON envelope and none of the fields every record has');
});

t.test('pretty: a worker is named in the head; a record about another worker names it and its pid', async (t) => {
  const worker = capture('pretty', { server: '0f872b83-1748-4946-85aa-eb596dba51db', worker: 2 });
  worker.log.warn('shedding');
  t.equal(worker.lines[0]!.replace(HEAD, ''), 'WARN  0f872b83/w2  shedding\n', 'a random server id is shortened to its first eight characters');
  const primary = capture('pretty');
  primary.log.info({ worker: 1, pid: 4242 }, 'worker ready');
  t.equal(primary.lines[0]!.replace(HEAD, ''), 'INFO  node-a/primary  worker ready  worker=1 pid=4242\n');
});

t.test('pretty: an error is its message; the stack only at error level and above', async (t) => {
  const { log, lines } = capture('pretty');
  const failure = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
  log.warn({ err: failure }, 'something failed');
  t.equal(lines[0]!.replace(HEAD, ''), 'WARN  node-a/primary  something failed  error="EPIPE: write EPIPE"\n', 'a warning: one line');
  log.error({ err: new Error('boom') }, 'unexpected');
  const [first, ...stack] = lines[1]!.trimEnd().split('\n');
  t.equal(first!.replace(HEAD, ''), 'ERROR node-a/primary  unexpected  error=boom');
  t.match(stack[0], /^ {4}Error: boom$/);
  t.ok(stack.length > 1 && stack.slice(1).every((frame) => /^ {4}\s*at /.test(frame)), 'the stack, indented');
});

t.test('pretty: a value too long for a line is named only; control characters never reach the terminal', async (t) => {
  const { log, lines } = capture('pretty');
  log.info({ target: { method: 'status', list: 'x'.repeat(200) }, note: 'y'.repeat(150), agent: 'curl\u001b[31m' }, 'line\u001b]0;owned\u0007 break\nnext');
  const line = lines[0]!;
  t.match(line, /target=\{…\} note=… /, 'long values elided');
  t.notMatch(line, /[\u0000-\u0009\u000b-\u001f\u007f]/, 'no control character but the final newline');
  t.equal(line.split('\n').length, 2, 'one line');
  t.match(line, /line\\u001b\]0;owned\\u0007 break\\u000anext/, 'the message shows them escaped');
});

t.test('redaction holds in pretty output: keys, Authorization and secrets never appear', async (t) => {
  for (const format of ['pretty', 'json'] as const) {
    const { log, lines } = capture(format);
    log.info(
      {
        req: { method: 'GET', url: '/x', headers: { authorization: 'Bearer fpk_secret_1' } },
        headers: { authorization: 'Bearer fpk_secret_2' },
        apikey: 'fpk_secret_3',
        key: 'fpk_secret_4',
        envelope: { apikey: 'fpk_secret_5', secret: 'hush_6' },
        webhook: { config: { secret: 'hush_7' } },
        secret: 'hush_8',
      },
      'control request',
    );
    const text = lines.join('');
    t.notMatch(text, /fpk_secret|hush_/, `${format}: no secret`);
    t.match(text, /\[redacted\]/, `${format}: said redacted`);
  }
  const { log, lines } = capture('pretty');
  log.info({ apikey: 'fpk_secret', secret: 'hush' }, 'x');
  t.match(lines[0], /apikey=\[redacted\] secret=\[redacted\]/, 'the redacted fields are shown as such');
});

t.test('json stays one JSON object per line', async (t) => {
  const { log, lines } = capture('json');
  log.info({ workers: 2 }, 'fleetplane started');
  t.match(JSON.parse(lines[0]!), { level: 30, server: 'node-a', worker: 0, workers: 2, msg: 'fleetplane started' });
});

t.test('auto is pretty on a terminal and JSON otherwise; an explicit format wins', async (t) => {
  t.equal(resolveLogFormat('auto', { isTTY: true }), 'pretty');
  t.equal(resolveLogFormat('auto', { isTTY: false }), 'json');
  t.equal(resolveLogFormat('auto', {}), 'json', 'a pipe has no isTTY');
  t.equal(resolveLogFormat('json', { isTTY: true }), 'json');
  t.equal(resolveLogFormat('pretty', {}), 'pretty');
});

t.test('a line that is not a record passes through unchanged', async (t) => {
  t.equal(prettyLine('not json'), 'not json\n');
});
