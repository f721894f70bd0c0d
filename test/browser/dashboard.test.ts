/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import t from 'tap';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { createKey } from '../../src/auth/keys.js';
import { createOrganization } from '../../src/auth/organizations.js';
import { EmbeddedStore } from '../../src/db/embedded/store.js';
import { ensureStandardIndexes } from '../../src/db/open.js';
import { request, type ServerProcess } from '../helpers/server-process.js';
import { meshConfig, meshIds, startMeshServer, waitForPeers } from '../mesh/helpers.js';
import { chromiumMissing, launchChromium } from './browser.js';

/** Screenshots land here (ignored by git): build artefacts of every run. */
const ARTIFACTS = path.resolve(import.meta.dirname, '..', '..', 'artifacts', 'dashboard');

const missing = chromiumMissing();
if (missing) {
  t.plan(0, `browser tests skipped: ${missing}`);
} else {
  t.setTimeout(480_000);
  await run();
}

async function run() {
  const { dbPath, ids } = meshIds('a', 'b', 'c');
  const [A, B, C] = ids as [string, string, string];
  const servers: ServerProcess[] = [];
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let tenantBase: string;
  const keys = { admin: '', viewer: '', tenant: '' };
  let tenantOrganization = '';
  /** Every request and WebSocket the page opened, and every console error, with the phase it happened in. */
  const requests: string[] = [];
  const consoleErrors: Array<{ phase: string; text: string }> = [];
  let phase = 'setup';

  t.before(async () => {
    const store = await EmbeddedStore.open(dbPath);
    await ensureStandardIndexes(store);
    const platform = await createOrganization(store, { name: 'acme', hosts: ['localhost'] });
    const tenant = await createOrganization(store, { name: 'globex', hosts: ['globex.test'] });
    tenantOrganization = tenant._id;
    keys.admin = (await createKey(store, { organizationId: platform._id, name: 'admin', admin: true })).key;
    keys.viewer = (await createKey(store, { organizationId: platform._id, name: 'viewer', permissions: { overview: true } })).key;
    keys.tenant = (await createKey(store, { organizationId: tenant._id, name: 'admin', admin: true })).key;
    await store.close();
    // A busy machine boots slowly: workers get longer than usual to come up.
    servers.push(...(await Promise.all(ids.map((id) => startMeshServer(meshConfig(id, dbPath, { workers: { count: 2, readyTimeoutMs: 120_000 } }))))));
    await Promise.all(servers.map((server) => server.readyWorkers(2, 0, 120_000)));
    await waitForPeers(servers[0]!, [B, C], 40_000);
    base = `http://localhost:${servers[0]!.port}`;
    tenantBase = `http://globex.test:${servers[0]!.port}`;
    mkdirSync(ARTIFACTS, { recursive: true });
    context = await launchChromium({ hostRules: ['MAP globex.test 127.0.0.1'] });
    context.on('request', (entry) => void requests.push(entry.url()));
    page = await context.newPage();
    page.on('websocket', (socket) => void requests.push(socket.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push({ phase, text: message.text() });
    });
    page.on('pageerror', (error) => void consoleErrors.push({ phase, text: `page error: ${error.message}` }));
  });
  t.teardown(async () => {
    await context?.close();
    await Promise.all(servers.map((server) => server.stop()));
  });

  const control = async (envelope: Record<string, unknown>) => (await request(servers[0]!.port, '/control', { body: envelope, key: keys.admin, host: 'localhost', timeoutMs: 20_000 })).json();
  const signIn = async (key: string) => {
    await page.fill('#key', key);
    await page.click('form button[type=submit]');
  };
  const signOut = async () => {
    await page.click('header button:has-text("Sign out")');
    await page.waitForSelector('#signin-title');
  };
  /** The state badges of the server view's worker rows, by worker number. */
  const workerStates = () =>
    page.evaluate(() => [...document.querySelectorAll('tbody tr[data-worker]')].map((row) => [Number((row as HTMLElement).dataset.worker), row.querySelector('td.state .badge')?.textContent]));
  const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  /** axe-core's serious and critical findings on the page as it is now. */
  const accessibilityProblems = async () => {
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
    const violations = await page.evaluate(async () => {
      const result = await (window as unknown as { axe: { run(context: Document, options: object): Promise<{ violations: any[] }> } }).axe.run(document, { resultTypes: ['violations'] });
      return result.violations.map((entry) => ({ id: entry.id, impact: entry.impact, help: entry.help, targets: entry.nodes.slice(0, 3).map((node: { target: string[] }) => node.target.join(' ')) }));
    });
    return violations.filter((entry) => entry.impact === 'serious' || entry.impact === 'critical');
  };

  t.test('no key, a wrong key and another organization\'s key see "platform key required"', async (t) => {
    phase = 'refusal';
    await page.goto(`${base}/dashboard`);
    t.equal(await page.textContent('#signin-title'), 'Platform key required', 'the first page asks for a platform key');
    t.same(await accessibilityProblems(), [], 'the sign-in page has no serious or critical accessibility finding');
    await signIn('fpk_nothere.wrongwrongwrong');
    t.match(await page.textContent('[role=alert]'), /Platform key required/, 'a wrong key is refused');
    await signIn(keys.tenant);
    await page.waitForFunction(() => document.querySelector('[role=alert]') && !document.querySelector('form button[disabled]'));
    t.match(await page.textContent('[role=alert]'), /Platform key required/, "another organization's key is refused on the platform's host");
    await page.goto(`${tenantBase}/dashboard`);
    await signIn(keys.tenant);
    await page.waitForSelector('[role=alert]');
    const refusal = await page.textContent('main');
    t.match(refusal, /Platform key required/, "a tenant's admin key is refused on its own host");
    t.notMatch(refusal, /acme|localhost|[0-9a-f]{24}/, 'the refusal names no other organization');
    t.notOk(await page.evaluate(() => sessionStorage.length), 'a refused key is not kept');
  });

  t.test('a platform key signs in and sees both workers of the server ready', async (t) => {
    phase = 'signed-in';
    await page.goto(`${base}/dashboard#/server/${A}`);
    await signIn(keys.admin);
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('tbody tr[data-worker]')];
      return rows.length === 2 && rows.every((row) => row.querySelector('td.state .badge')?.textContent === 'ready');
    }, undefined, { timeout: 20_000 });
    t.same(await workerStates(), [[1, 'ready'], [2, 'ready']]);
    t.notMatch(page.url(), /fpk_/, 'the key is never in the URL');
    await page.waitForFunction(() => document.querySelector('.stream .badge')?.textContent === 'live', undefined, { timeout: 15_000 });
    t.pass('the event stream is live');
    await page.evaluate(() => ((window as unknown as { notReloaded: boolean }).notReloaded = true));
  });

  t.test('kill -9 of a worker: the page shows it crashed, then its replacement ready, without a reload', async (t) => {
    const pid = Number(await page.getAttribute('tr[data-worker="1"]', 'data-pid'));
    process.kill(pid, 'SIGKILL');
    await page.waitForFunction(
      (old) => {
        const row = [...document.querySelectorAll('tr[data-worker="1"]')].find((entry) => Number((entry as HTMLElement).dataset.pid) !== old);
        return row && /crashed .* \(pid \d+, signal SIGKILL\)/.test(row.querySelector('.crash')?.textContent ?? '') && row.querySelector('td.state .badge')?.textContent === 'ready';
      },
      pid,
      { timeout: 30_000 },
    );
    const row = page.locator('tr[data-worker="1"]');
    t.match(await row.textContent(), new RegExp(`crashed .* \\(pid ${pid}, signal SIGKILL\\)`), 'the row names the crashed process');
    t.equal((await row.locator('td').nth(3).textContent())?.trim(), '1', 'one restart of that slot');
    t.ok(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded), 'the page was never reloaded');
  });

  t.test('cordon a worker from the page: /control status confirms it', async (t) => {
    await page.click(`button[aria-label="Cordon worker 2 of ${A}"]`);
    await page.waitForSelector('dialog[open]');
    t.match(await page.textContent('dialog[open] h2'), `Cordon worker 2 of ${A}?`, 'the action asks for confirmation');
    t.same(await accessibilityProblems(), [], 'the confirmation dialog has no serious or critical accessibility finding');
    await page.click('dialog[open] button.danger');
    await page.waitForSelector(`.ok:has-text("Cordoned worker 2 of ${A}.")`);
    const status = await control({ method: 'status', server: A, worker: 2 });
    t.equal(status.replies[0].result.status, 'cordoned', '/control status says worker 2 is cordoned');
    await page.waitForFunction(() => document.querySelector('tr[data-worker="2"] td.state .badge')?.textContent === 'cordoned', undefined, { timeout: 10_000 });
    t.pass('the page shows it cordoned');
  });

  t.test('an action the key may not take is refused with its message; nothing changes', async (t) => {
    phase = 'refused-action';
    await signOut();
    await signIn(keys.viewer);
    await page.waitForSelector(`button[aria-label="Uncordon worker 2 of ${A}"]`, { timeout: 20_000 });
    await page.click(`button[aria-label="Uncordon worker 2 of ${A}"]`);
    await page.click('dialog[open] button.danger');
    const alert = await page.waitForSelector('.alert[role=alert]');
    t.match(await alert.textContent(), /Uncordon worker 2 of .* was refused: .*"cordon"/, "the server's refusal is shown");
    t.equal((await control({ method: 'status', server: A, worker: 2 })).replies[0].result.status, 'cordoned', 'the worker is still cordoned');
    t.equal(await page.textContent('tr[data-worker="2"] td.state .badge'), 'cordoned', 'and the page still says so');
    await signOut();
    await signIn(keys.admin);
    await page.waitForSelector('tbody tr[data-worker]', { timeout: 20_000 });
    phase = 'signed-in';
  });

  t.test('the WebSocket closing shows "reconnecting" and the page recovers', async (t) => {
    await control({ method: 'cordon', server: A, worker: 2, data: false });
    await page.waitForFunction(() => document.querySelector('.stream .badge')?.textContent === 'live', undefined, { timeout: 15_000 });
    await page.click(`button[aria-label="Rolling restart of server ${A}"]`);
    await page.click('dialog[open] button.danger');
    // Each worker closes its WebSockets (1001) when it drains: the page's socket goes with one of them.
    await page.waitForFunction(() => document.querySelector('.stream .badge')?.textContent === 'reconnecting…', undefined, { timeout: 90_000, polling: 'raf' });
    t.pass('the page says it is reconnecting');
    await page.waitForFunction(() => document.querySelector('.stream .badge')?.textContent === 'live', undefined, { timeout: 60_000 });
    t.pass('and is live again');
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('tbody tr[data-worker]')];
      return rows.length === 2 && rows.every((row) => row.querySelector('td.state .badge')?.textContent === 'ready');
    }, undefined, { timeout: 120_000 });
    t.pass('both replacements are shown ready');
  });

  t.test('the events view lists what happened, newest first, and filters it', async (t) => {
    await page.goto(`${base}/dashboard#/events`);
    await page.waitForSelector('.event-row');
    await page.waitForFunction(() => /rolling restart of 2 workers done/.test(document.querySelector('.vlist')?.textContent ?? ''), undefined, { timeout: 60_000 });
    // The list is virtual: only rows in view exist, so each kind of entry is found through the text filter.
    for (const expected of ['crashed: signal SIGKILL', 'worker 2: ready → cordoned', 'restarted as pid', `mesh link to ${B} up`]) {
      await page.fill('.filters input[type=search]', expected);
      await page.waitForFunction((wanted) => [...document.querySelectorAll('.event-row .message')].some((node) => node.textContent?.includes(wanted)), expected, { timeout: 10_000 });
      t.pass(`the events list has "${expected}"`);
    }
    await page.fill('.filters input[type=search]', '');
    const times = await page.$$eval('.event-row time', (nodes) => nodes.map((node) => Date.parse(node.getAttribute('datetime')!)));
    t.same(times, [...times].sort((a, b) => b - a), 'newest first');
    await page.selectOption('.filters select >> nth=0', 'crash');
    const kinds = await page.$$eval('.event-row', (rows) => rows.map((row) => (row as HTMLElement).dataset.kind));
    t.ok(kinds.length > 0 && kinds.every((kind) => kind === 'crash'), 'the kind filter keeps crashes only');
    t.same(await accessibilityProblems(), [], 'the events view has no serious or critical accessibility finding');
    await page.selectOption('.filters select >> nth=0', '');
  });

  t.test('shed and unshed an organization from the organizations view', async (t) => {
    await request(servers[0]!.port, `/fixture/org?org=${tenantOrganization}`);
    await page.goto(`${base}/dashboard#/organizations`);
    await page.waitForSelector('.org-row:has-text("globex")', { timeout: 20_000 });
    await page.click('button[aria-label="Shed globex"]');
    await page.click('dialog[open] button.danger');
    await page.waitForSelector('.org-row:has-text("shed on every server")', { timeout: 20_000 });
    const shed = await control({ method: 'overview.cluster', master: true });
    t.ok(shed.replies[0].result.servers.every((entry: { shed: string[] }) => entry.shed.includes(tenantOrganization)), 'every server sheds it');
    t.same(await accessibilityProblems(), [], 'the organizations view has no serious or critical accessibility finding');
    await page.click('button[aria-label="Stop shedding globex"]');
    await page.click('dialog[open] button.danger');
    await page.waitForSelector('.org-row:has-text("globex") .badge:text-is("served")', { timeout: 20_000 });
    t.pass('it is served again');
  });

  t.test('three servers on one host, one cordoned: cluster and server views, in light and dark, wide and narrow', async (t) => {
    await control({ method: 'cordon', server: C, master: true, data: true });
    await page.goto(`${base}/dashboard#/cluster`);
    await page.waitForFunction((id) => [...document.querySelectorAll('tbody tr')].length === 3 && /2 cordoned/.test([...document.querySelectorAll('tbody tr')].find((row) => row.textContent?.includes(id))?.textContent ?? ''), C, { timeout: 20_000 });
    t.same(await page.$$eval('tbody th[scope=row]', (cells) => cells.map((cell) => cell.textContent)), [A, B, C], 'every server of the mesh is listed');
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await page.goto(`${base}/dashboard#/cluster`);
      await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 3, undefined, { timeout: 20_000 });
      t.same(await accessibilityProblems(), [], `the cluster view (${scheme}) has no serious or critical accessibility finding`);
      await page.screenshot({ path: path.join(ARTIFACTS, `cluster-${scheme}.png`), fullPage: true });
      await page.goto(`${base}/dashboard#/server/${C}`);
      await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-worker]').length === 2 && document.querySelectorAll('.spark').length > 0, undefined, { timeout: 30_000 });
      t.same(await accessibilityProblems(), [], `the server view (${scheme}) has no serious or critical accessibility finding`);
      await page.screenshot({ path: path.join(ARTIFACTS, `server-${scheme}.png`), fullPage: true });
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 320, height: 720 });
    for (const view of ['cluster', `server/${C}`, 'events']) {
      await page.goto(`${base}/dashboard#/${view}`);
      await page.waitForSelector('main h1');
      await page.waitForTimeout(300);
      t.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 320), `${view} fits 320 px (tables scroll inside their own box)`);
      await page.screenshot({ path: path.join(ARTIFACTS, `${view.split('/')[0]}-320.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  t.test('keyboard: the views and actions are reachable with Tab and the dialog closes with Escape', async (t) => {
    await page.goto(`${base}/dashboard#/server/${A}`);
    await page.waitForSelector('tbody tr[data-worker]', { timeout: 20_000 });
    await page.focus(`button[aria-label="Restart worker 1 of ${A}"]`);
    await page.keyboard.press('Enter');
    await page.waitForSelector('dialog[open]');
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Cancel', 'the safe choice has the focus');
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.querySelector('dialog'));
    t.pass('Escape cancels');
    const reached = new Set<string>();
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press('Tab');
      reached.add(await page.evaluate(() => document.activeElement?.textContent?.trim() ?? ''));
    }
    for (const name of ['Cluster', 'Organizations', 'Events', 'Cordon server', 'Cordon']) t.ok(reached.has(name), `Tab reaches "${name}"`);
  });

  t.test('no console error, and no request left the server\'s origin', async (t) => {
    // The browser itself logs each 403 answer (refused sign-ins, the refused action) as a failed resource.
    const unexpected = consoleErrors.filter((entry) => !((entry.phase === 'refusal' || entry.phase === 'refused-action') && /status of 403/.test(entry.text)));
    t.same(unexpected, [], 'no console error besides the refusals the tests asked for');
    const origins = new Set(requests.map((url) => new URL(url).host));
    t.same([...origins].sort(), [`globex.test:${servers[0]!.port}`, `localhost:${servers[0]!.port}`].sort(), 'every request went to the page\'s own origin');
    t.ok(requests.some((url) => url.startsWith('ws://localhost')), 'including the WebSocket');
  });
}
