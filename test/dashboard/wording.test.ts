import t from 'tap';
import { register } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// The dashboard imports its libraries from the path the server serves them at (`../vendor/preact.js`): here they
// come from the installed packages, as the server takes them.
const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier.endsWith('/vendor/preact.js')) return next('preact', context);
  if (specifier.endsWith('/vendor/htm.js')) return next('htm', context);
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`, import.meta.url);

const DASHBOARD = path.resolve(import.meta.dirname, '..', '..', 'dashboard');
const load = (file: string) => import(pathToFileURL(path.join(DASHBOARD, file)).href);

interface VNode {
  type: unknown;
  props: { children?: unknown; class?: string };
}

/** The text of a rendered tree's elements (not of its components, which only a browser runs), in order. */
function texts(node: unknown, out: Array<{ type: string; text: string }> = []): Array<{ type: string; text: string }> {
  if (Array.isArray(node)) {
    for (const child of node) texts(child, out);
    return out;
  }
  if (!node || typeof node !== 'object' || !('props' in node)) return out;
  const vnode = node as VNode;
  if (typeof vnode.type === 'string') out.push({ type: vnode.type, text: ownText(vnode.props.children) });
  texts(vnode.props.children, out);
  return out;
}

const ownText = (children: unknown): string =>
  Array.isArray(children) ? children.map(ownText).join('') : typeof children === 'string' || typeof children === 'number' ? String(children) : '';

const server = (id: string, organizations: Array<{ organization_id: string; sockets: number }> = []) => ({
  server: id, host: 'h', version: '1', status: 'ready', ready: true, uptimeMs: 1_000, connections: 0, requestsPerSecond: 0, rssBytes: 0,
  workers: { target: 1, active: 1, cordoned: 0, breaker: { tripped: false } }, organizations, shed: [],
});

const cluster = (servers: ReturnType<typeof server>[]) => ({ cluster: 'c', via: 'node-a', servers, missing: [], failed: [], organizationNames: { 'org-1': 'acme', 'org-2': 'globex' } });

t.test('the dashboard says "1 server" and "1 organization": the plural only when the count is not one', async (t) => {
  const { ClusterView } = await load('views/cluster.js');
  const { OrganizationsView } = await load('views/organizations.js');
  const store = {};
  const paragraph = (tree: unknown) => texts(tree).find((entry) => entry.type === 'p')?.text;

  t.equal(paragraph(ClusterView({ state: { cluster: cluster([server('node-a')]) }, store })), '1 server, seen through node-a.');
  t.equal(paragraph(ClusterView({ state: { cluster: cluster([server('node-a'), server('node-b')]) }, store })), '2 servers, seen through node-a.');

  const one = cluster([server('node-a', [{ organization_id: 'org-1', sockets: 1 }])]);
  t.equal(paragraph(OrganizationsView({ state: { cluster: one }, store })), '1 organization active or shed on 1 server.');
  const two = cluster([server('node-a', [{ organization_id: 'org-1', sockets: 0 }]), server('node-b', [{ organization_id: 'org-2', sockets: 2 }])]);
  t.equal(paragraph(OrganizationsView({ state: { cluster: two }, store })), '2 organizations active or shed on 2 servers.');
  t.equal(paragraph(OrganizationsView({ state: { cluster: cluster([server('node-a')]) }, store })), '0 organizations active or shed on 1 server.');
});

t.test('counts in the shed confirmation and the organization rows follow the same rule', async (t) => {
  const { shedAction } = await load('lib/actions.js');
  const { count } = await load('lib/format.js');
  t.match(shedAction('org-1', 'acme', ['node-a'], true).detail, / 1 server\.$/);
  t.match(shedAction('org-1', 'acme', ['node-a', 'node-b'], false).detail, / 2 servers\.$/);
  t.equal(count(1, 'socket'), '1 socket');
  t.equal(count(0, 'socket'), '0 sockets');
  t.equal(count(3, 'event'), '3 events');
});
