import type { AddressInfo } from 'node:net';
import t from 'tap';
import { automationApp } from '../api/fixtures/app.js';

const fixture = await automationApp();
t.teardown(() => fixture.close());
await fixture.app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(fixture.app.server.address() as AddressInfo).port}`;

t.test('/docs is Fleetplane\'s page: its title, logo and icon, one URL per operation', async (t) => {
  const html = await (await fetch(`${base}/docs`)).text();
  t.match(html, /<title>Fleetplane API<\/title>/);
  t.notMatch(html, /Swagger UI/, 'the page is not titled after the UI library');
  const icon = /href="([^"]+favicon\.svg)"/.exec(html)?.[1];
  t.ok(icon, 'an icon of its own');
  const served = await fetch(new URL(icon!, `${base}/docs`));
  t.equal(served.status, 200);
  t.match(await served.text(), /^<svg /);
  const initializer = await (await fetch(`${base}/docs/static/swagger-initializer.js`)).text();
  t.match(initializer, /"deepLinking":true/, 'deep linking on: each operation has its own URL');
  const logo = /img\.src = 'data:image\/svg\+xml;base64,([^']+)'/.exec(initializer)?.[1];
  t.match(Buffer.from(logo ?? '', 'base64').toString(), />Fleetplane<\/text>/, 'the header shows Fleetplane');
});

t.test('GET /ws is marked a WebSocket: the page offers no "Try it out" for it and says how to connect', async (t) => {
  const document = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, Record<string, Record<string, unknown>>> };
  const ws = document.paths['/ws']!.get!;
  t.equal(ws['x-websocket'], true);
  t.match(ws.description, /This is a WebSocket, so this page cannot try it\. Connect with any WebSocket client/);
  t.equal(document.paths['/healthz']!.get!['x-websocket'], undefined, 'HTTP operations are not marked');
  const initializer = await (await fetch(`${base}/docs/static/swagger-initializer.js`)).text();
  t.match(initializer, /allowTryItOutFor/, 'the page plugin that withholds "Try it out" is sent');
  t.match(initializer, /['"]x-websocket['"]\]\) === true \? false/, 'for operations marked x-websocket');
  t.match(initializer, /DownloadUrl\(system\)/, 'beside the plugin that loads the document');
});
