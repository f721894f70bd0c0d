import t from 'tap';
import https from 'node:https';
import path from 'node:path';
import { ServerProcess } from '../helpers/server-process.js';
import { scaled } from '../helpers/wait.js';

const TLS = path.resolve(import.meta.dirname, '..', 'fixtures', 'tls');

function get(port: number, pathname: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: pathname, rejectUnauthorized: false, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.setTimeout(scaled(10_000), () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

t.test('HTTPS: the primary hands TLS connections to workers and answers the fallback over TLS', async (t) => {
  const server = await ServerProcess.start({
    workers: 2,
    https: { port: 0, key: path.join(TLS, 'key.pem'), cert: path.join(TLS, 'cert.pem') },
    fallback: { redirect: 'https://lb.example.test' },
  });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  const httpsPort = server.events.find((event) => event.event === 'started')!.httpsPort as number;
  t.ok(httpsPort > 0, 'an HTTPS port is bound');

  const reply = await get(httpsPort, '/whoami');
  t.equal(reply.status, 200);
  t.ok([1, 2].includes(JSON.parse(reply.body).worker), 'served by a worker');

  await server.command('cordon', { value: true });
  const redirect = await get(httpsPort, '/a?b=c');
  t.equal(redirect.status, 307);
  t.equal(redirect.headers.location, 'https://lb.example.test/a?b=c');
});
