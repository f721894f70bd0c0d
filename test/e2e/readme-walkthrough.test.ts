import t from 'tap';
import { Foreground, Session, blocksOf, cloneDirectory, matchExampleReplies, portMap, recipeEnv, until } from './readme-fixture.js';
import { request } from '../helpers/server-process.js';

t.setTimeout(300_000);

t.test('README "The first ten minutes", run as written: start, key, provider, workflow, /docs, cordon and the 307', async (t) => {
  const [first, ...second] = blocksOf('README.md', '## The first ten minutes');
  // The fixed ports change (the machine is shared); `npm install` is what this checkout already did.
  const { port, substitute } = await portMap([8080, 9000]);
  const start = first!.split('\n').filter((line) => line.trim() !== 'npm install').join('\n');
  t.not(start, first, 'the first block installs, then starts');
  const cwd = cloneDirectory(substitute);

  const server = new Foreground(t, start, { cwd, env: recipeEnv({ FLEETPLANE_HTTP_PORT: String(port(8080)) }) });
  await until('the server to be ready', () => request(port(8080), '/readyz').then((reply) => reply.status === 200, () => false));
  t.match(server.output, /created organization "default" .* saved to .*data\/admin\.key \(mode 0600\)/, 'the admin key is saved to data/admin.key');

  const session = new Session(t, { cwd });
  const [key, workflow, docs, cordon] = second.map(substitute);
  // The replies the README shows as comments (`# {"status":"ready",…}`) are compared with what each block printed.
  let examples = 0;
  const status = await session.run(key!);
  examples += matchExampleReplies(t, second[0]!, status);
  t.match(status, /\{"status":"ready","server":"[^"]+","worker":1,"version":"[^"]+"\}/, 'healthz answers');
  t.match(status, /^\S+ +worker 1 +\d+ +ready /m, 'ctl status answers from the worker through the control socket: a row of its table');

  const made = await session.run(workflow!);
  examples += matchExampleReplies(t, second[1]!, made);
  t.match(made, /POST \/items\/42 \{"title":"Item hi"\} → 201/, 'the example upstream got the workflow\'s request');
  t.match(made, /\{"make-item":\[\{"created":\{[^\n]*"id":"42","title":"Item hi"/, 'the workflow answers what the upstream created');

  const document = await session.run(docs!);
  t.match(document, /^\{"openapi":"3\.1\.0"/m, 'the OpenAPI document');
  examples += matchExampleReplies(t, second[2]!, document);
  const page = await request(port(8080), '/docs');
  t.equal(page.status, 200);
  t.match(page.body, /<title>Fleetplane API<\/title>/, '/docs is the UI page');

  const fallback = await session.run(cordon!);
  examples += matchExampleReplies(t, second[3]!, fallback);
  t.ok(examples >= 3, `the section's example replies were all compared (${examples})`);
  t.match(fallback, /HTTP\/1\.1 307 Temporary Redirect\r?\nlocation: https:\/\/lb\.example\.com\/anything/i, 'cordoned: the primary answers with a 307 to the load balancer');
  t.match(fallback, /\{"status":"ready"/, 'uncordoned: ready again');
  t.notMatch(fallback, /error|no answer/i, 'every ctl command was answered');

  await server.stop();
  t.match(server.output, /"signal":"SIGINT"[^\n]*"msg":"shutdown complete"/, 'Ctrl-C: a graceful shutdown');
  await session.run('kill %1');
});
