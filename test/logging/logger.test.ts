import t from 'tap';
import { createLogger, redactedUrl } from '../../src/logging/logger.js';
import { ServerProcess } from '../helpers/server-process.js';
import { testApp, testStore } from '../auth/fixtures/tenants.js';

function capture(base: Record<string, unknown> = {}) {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', base, destination: { write: (line: string) => void lines.push(line) } });
  return { log, lines };
}

t.test('a record about another worker names it targetWorker: no record has a field twice', async (t) => {
  const { log, lines } = capture({ server: 's', worker: 0 });
  log.error({ worker: 2, pid: 42 }, 'worker crashed');
  t.equal(lines.length, 1);
  t.equal(lines[0]!.match(/"worker":/g)?.length, 1, '"worker" appears once');
  t.match(JSON.parse(lines[0]!), { worker: 0, targetWorker: 2, pid: 42, msg: 'worker crashed' });
});

t.test('query values are redacted from logged URLs; paths are kept', async (t) => {
  t.equal(redactedUrl('/metrics?token=secret123&x=1'), '/metrics?token=[redacted]&x=[redacted]');
  t.equal(redactedUrl('/healthz'), '/healthz');
  t.equal(redactedUrl('/a?flag'), '/a?flag');
  const store = await testStore();
  t.teardown(() => store.close());
  const { log, lines } = capture();
  const { app } = await testApp(store, { logger: log, config: { log: { requests: true } } });
  t.teardown(() => app.close());
  await app.inject({ method: 'GET', url: '/metrics?token=secret123' });
  const text = lines.join('');
  t.match(text, /"url":"\/metrics\?token=\[redacted\]"/, 'the request was logged with its path');
  t.notMatch(text, /secret123/, 'without the query value');
});

t.test('the primary logs one record per worker ready, with its pid', async (t) => {
  const server = await ServerProcess.start({ workers: 2, log: { level: 'info' } });
  t.teardown(() => server.stop());
  const ready = await server.readyWorkers(2);
  for (const event of ready) {
    const record = await server.waitFor((line) => line.msg === 'worker ready' && line.pid === event.pid);
    t.match(record, { worker: 0, targetWorker: event.workerId, pid: event.pid });
  }
});
