// A tiny upstream for the README's examples, on 127.0.0.1:9000 (PORT=N to change it): the `items` API that
// examples/resources.json calls, and an edge's origin registry that examples/node-lifecycle.json's routing
// workflow registers the node with. It prints one line per request it answers, and keeps nothing.
//
//   node examples/upstream.mjs
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';

const port = Number(process.env.PORT ?? 9000);

const routes = [
  // POST /items/{id} → the item as created (examples/resources.json, workflow make-item).
  [/^\/items\/([^/]+)$/, (match, body) => [201, { id: decodeURIComponent(match[1]), ...body, createdAt: new Date().toISOString() }]],
  // POST /v1/origins → the ids the node was registered under; POST /v1/origins/remove → what was removed.
  [/^\/v1\/origins$/, (_match, body) => [201, { ids: [randomUUID()], address: body.address ?? null }]],
  [/^\/v1\/origins\/remove$/, (_match, body) => [200, { removed: body.registration_ids ?? [] }]],
];

const server = createServer((request, response) => {
  let text = '';
  request.setEncoding('utf8');
  request.on('data', (chunk) => (text += chunk));
  request.on('end', () => {
    let body = {};
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      return answer(400, { error: 'the body is not JSON' });
    }
    const path = new URL(request.url ?? '/', 'http://upstream').pathname;
    const route = request.method === 'POST' ? routes.find(([pattern]) => pattern.test(path)) : undefined;
    if (!route) return answer(404, { error: `no ${request.method} ${path} here` });
    const [status, reply] = route[1](route[0].exec(path), body);
    answer(status, reply);

    function answer(status, reply) {
      process.stdout.write(`${request.method} ${path} ${text || '-'} → ${status}\n`);
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    }
  });
});

server.listen(port, '127.0.0.1', () => process.stdout.write(`example upstream on http://127.0.0.1:${port}\n`));
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
