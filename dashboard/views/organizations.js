import { html } from '../lib/html.js';
import { count } from '../lib/format.js';
import { shedAction } from '../lib/actions.js';
import { ActionButton, Badge } from './parts.js';
import { VirtualList } from './virtual-list.js';

/** Active and shed organizations across the cluster, each with where it is served and its open sockets. */
export function OrganizationsView({ state, store }) {
  const { cluster } = state;
  if (!cluster) return html`<p class="muted" role="status">Loading organizations…</p>`;
  const rows = new Map();
  const row = (id) => {
    if (!rows.has(id)) rows.set(id, { key: id, id, name: cluster.organizationNames[id] ?? null, servers: [], sockets: 0, shedOn: [] });
    return rows.get(id);
  };
  for (const server of cluster.servers) {
    for (const presence of server.organizations) {
      const entry = row(presence.organization_id);
      entry.servers.push(server.server);
      entry.sockets += presence.sockets;
    }
    for (const id of server.shed) row(id).shedOn.push(server.server);
  }
  const items = [...rows.values()].sort((a, b) => (a.name ?? a.id).localeCompare(b.name ?? b.id));
  const renderRow = (entry) => {
    const shed = entry.shedOn.length > 0;
    const label = entry.name ?? entry.id;
    return html`<div class="org-row">
      <span class="org-name"><strong>${label}</strong>${entry.name ? html` <span class="muted">${entry.id}</span>` : null}</span>
      <span>${entry.servers.length ? `active on ${entry.servers.join(', ')}` : 'not active'}</span>
      <span>${count(entry.sockets, 'socket')}</span>
      <span>${shed ? html`<${Badge} state="fallback" label="shed on ${entry.shedOn.length === cluster.servers.length ? 'every server' : entry.shedOn.join(', ')}" />` : html`<${Badge} state="ready" label="served" />`}</span>
      <${ActionButton} label=${shed ? 'Stop shedding' : 'Shed'} title="${shed ? 'Stop shedding' : 'Shed'} ${label}" onClick=${() => store.ask(shedAction(entry.id, entry.name, cluster.servers, !shed))} />
    </div>`;
  };
  return html`<section aria-labelledby="organizations-title">
    <h1 id="organizations-title">Organizations</h1>
    <p class="muted">${count(items.length, 'organization')} active or shed on ${count(cluster.servers.length, 'server')}.</p>
    <${VirtualList} items=${items} rowHeight=${56} viewHeight=${560} renderRow=${renderRow} label="Organizations" empty="No organization is active on any server." />
  </section>`;
}
