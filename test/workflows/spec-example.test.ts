import { createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import { runCli } from '../cli/fixtures/cli.js';
import { ServerProcess, tempDir } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';
import { startUpstream } from '../api/fixtures/upstream.js';
import { scaled } from '../helpers/wait.js';

// A CLI process compiles the sources on start, and a server forks a worker: slow on a busy machine.
t.setTimeout(scaled(300_000));

/** SPEC 11.3's example resource file, character for character, but for the provider's port. */
const EXAMPLE = `{
  "apis": [{ "name": "items", "baseUrl": "http://127.0.0.1:9000", "timeoutMs": 5000,
             "endpoints": { "create": { "method": "post", "path": "/items/{id}" } } }],
  "workflows": [{ "name": "make-item",
                  "steps": [{ "name": "create", "api": "items", "endpoint": "create", "method": "post",
                              "data": { "id": "\${input.id}", "title": "Item \${input.title}" } }],
                  "output": { "created": "\${steps.create}" } }],
  "webhooks": [{ "name": "github", "verify": { "scheme": "hmac-sha256", "header": "x-hub-signature-256",
                 "prefix": "sha256=", "secret": "change-me" },
                 "event": { "header": "x-github-event" }, "workflows": { "push": "make-item" } }]
}`;

function post(port: number, url: string, body: string, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: '127.0.0.1', port, path: url, method: 'POST', agent: false, headers: { host: 'localhost', 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (response) => {
        let text = '';
        response.on('data', (chunk) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, json: text ? JSON.parse(text) : undefined }));
      },
    );
    request.setTimeout(scaled(30_000), () => request.destroy(new Error('timed out')));
    request.on('error', reject);
    request.end(body);
  });
}

t.test('the SPEC 11.3 file applied with "fleetplane apply -f" serves POST /workflows/make-item and the github webhook', async (t) => {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const { dataDir, tenants } = await dataDirWithTenants([{ name: 'acme', hosts: ['localhost', '127.0.0.1'] }]);
  const file = path.join(tempDir(), 'resources.json');
  writeFileSync(file, EXAMPLE.replace('http://127.0.0.1:9000', upstream.baseUrl));

  const applied = await runCli(['apply', '-f', file, '--data-dir', dataDir]);
  t.equal(applied.code, 0, applied.stderr);
  t.match(applied.stdout, /3 resources: 3 created, 0 changed, 0 unchanged/);
  t.notMatch(applied.stdout, /change-me/);

  const server = await ServerProcess.start({ workers: 1, dataDir });
  t.teardown(() => server.stop());
  await server.readyWorkers(1);

  const reply = await post(server.port, '/workflows/make-item', JSON.stringify({ 'make-item': [{ id: '42', title: 'hi' }] }), { authorization: `Bearer ${tenants[0]!.adminKey}` });
  t.equal(reply.status, 200, JSON.stringify(reply.json));
  const [hit] = upstream.hits;
  t.equal(hit?.method, 'POST');
  t.equal(hit?.url, '/items/42');
  t.same(JSON.parse(hit!.body), { title: 'Item hi' });
  t.same(reply.json, { 'make-item': [{ created: { id: '42', title: 'Item hi' } }] }, "the provider's JSON reply under created");

  const push = JSON.stringify({ id: '43', title: 'pushed' });
  const signature = `sha256=${createHmac('sha256', 'change-me').update(push).digest('hex')}`;
  const accepted = await post(server.port, '/webhooks/github', push, { 'x-hub-signature-256': signature, 'x-github-event': 'push' });
  t.equal(accepted.status, 202);
  const hits = await upstream.waitForHits(2);
  t.equal(hits[1]!.url, '/items/43', 'the webhook ran make-item in the worker');
  t.equal(server.count((event) => event.event === 'worker:crash'), 0);
});
