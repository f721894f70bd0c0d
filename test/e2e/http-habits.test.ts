import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import t from 'tap';
import { ServerProcess, tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { scaled } from '../helpers/wait.js';

t.setTimeout(scaled(120_000));

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function send(port: number, options: { method?: string; path: string; headers: Record<string, string>; body?: unknown }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const text = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers = { ...options.headers, ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }) };
    const request = http.request({ host: '127.0.0.1', port, path: options.path, method: options.method ?? 'GET', agent: false, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }));
    });
    request.setTimeout(scaled(20_000), () => request.destroy(new Error('timed out')));
    request.on('error', reject);
    request.end(text);
  });
}

t.test('through the primary and a worker: request ids, the forwarded client address, CORS, compression and static files', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'platform', hosts: ['localhost'] },
    { name: 'tenant-a', hosts: ['a.test'] },
  ]);
  const [platform] = tenants as [(typeof tenants)[0]];
  const root = path.join(tempDir(), 'public');
  mkdirSync(root);
  writeFileSync(path.join(root, 'app.js'), 'console.log("served by a worker");\n');
  writeFileSync(path.join(root, '..', 'secret.txt'), 'outside\n');
  symlinkSync(path.join(root, '..', 'secret.txt'), path.join(root, 'link.txt'));
  const server = await ServerProcess.start({
    workers: 1,
    dataDir,
    log: { level: 'info', requests: true },
    http: { port: 0, host: '127.0.0.1', trustProxy: ['127.0.0.1'], cors: { origins: ['https://console.test'] }, static: { root } },
  });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);

  // A client behind the proxy (this test, at 127.0.0.1) asks as the platform, naming tenant-a's host in X-Forwarded-Host.
  const status = await send(server.port, {
    method: 'POST',
    path: '/control',
    headers: { host: 'localhost', authorization: `Bearer ${platform.adminKey}`, 'x-request-id': 'e2e-habits-1', 'x-forwarded-for': '203.0.113.7', 'x-forwarded-host': 'a.test' },
    body: { method: 'status', broadcast: true },
  });
  t.equal(status.status, 200, `served as the tenant of its Host: ${status.body.toString()}`);
  t.equal(status.headers['x-request-id'], 'e2e-habits-1');
  const incoming = await server.waitFor((event) => event.reqId === 'e2e-habits-1' && event.msg === 'incoming request');
  t.equal((incoming.req as { remoteAddress?: string }).remoteAddress, '203.0.113.7', 'the access log names the forwarded client');
  await server.waitFor((event) => event.reqId === 'e2e-habits-1' && event.msg === 'request completed');

  const preflight = await send(server.port, {
    method: 'OPTIONS',
    path: '/control',
    headers: { host: 'localhost', origin: 'https://console.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
  });
  t.equal(preflight.status, 204);
  t.equal(preflight.headers['access-control-allow-origin'], 'https://console.test');
  t.match(preflight.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'a generated id when none was sent');

  const document = await send(server.port, { path: '/openapi.json', headers: { host: 'localhost', 'accept-encoding': 'gzip' } });
  t.equal(document.headers['content-encoding'], 'gzip');
  t.match(JSON.parse(gunzipSync(document.body).toString()), { openapi: String });

  const file = await send(server.port, { path: '/static/app.js', headers: { host: 'localhost' } });
  t.equal(file.status, 200);
  t.equal(file.body.toString(), 'console.log("served by a worker");\n');
  for (const url of ['/static/%2e%2e/secret.txt', '/static/..%2fsecret.txt', '/static/link.txt']) {
    const refused = await send(server.port, { path: url, headers: { host: 'localhost' } });
    t.equal(refused.status, 404, url);
    t.notOk(refused.body.toString().includes('outside'), `${url}: nothing from outside the root`);
  }
});
