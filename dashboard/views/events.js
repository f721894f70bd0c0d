import { html } from '../lib/html.js';
import { clock, count } from '../lib/format.js';
import { VirtualList } from './virtual-list.js';

export const KINDS = ['status', 'crash', 'restart', 'recycle', 'quarantine', 'breaker', 'capacity', 'rolling', 'shutdown', 'shed', 'organization', 'mesh', 'autoscaler'];

/** The cluster's events, newest first, as they happen; filtered by kind, server and text. */
export function EventsView({ state, store }) {
  const { events, filter } = state;
  const servers = [...new Set(events.map((entry) => entry.server))].sort();
  const text = filter.text.trim().toLowerCase();
  const shown = events.filter(
    (entry) => (!filter.kind || entry.kind === filter.kind) && (!filter.server || entry.server === filter.server) && (!text || entry.message.toLowerCase().includes(text)),
  );
  const items = shown.map((entry) => ({ ...entry, key: `${entry.server}:${entry.seq}` }));
  const renderRow = (entry) => html`<div class="event-row" data-kind=${entry.kind}>
    <time datetime=${new Date(entry.at).toISOString()}>${clock(entry.at)}</time>
    <span class="kind kind-${entry.kind}">${entry.kind}</span>
    <span class="muted">${entry.server}</span>
    <span class="message">${entry.message}</span>
  </div>`;
  return html`<section aria-labelledby="events-title">
    <h1 id="events-title">Events</h1>
    <form class="filters" onSubmit=${(event) => event.preventDefault()}>
      <label>Kind <select value=${filter.kind} onChange=${(event) => store.setFilter({ kind: event.currentTarget.value })}>
        <option value="">all</option>${KINDS.map((kind) => html`<option value=${kind}>${kind}</option>`)}
      </select></label>
      <label>Server <select value=${filter.server} onChange=${(event) => store.setFilter({ server: event.currentTarget.value })}>
        <option value="">all</option>${servers.map((server) => html`<option value=${server}>${server}</option>`)}
      </select></label>
      <label>Text <input type="search" value=${filter.text} onInput=${(event) => store.setFilter({ text: event.currentTarget.value })} /></label>
    </form>
    <p class="muted" role="status">${shown.length} of ${count(events.length, 'event')}</p>
    <${VirtualList} items=${items} rowHeight=${44} viewHeight=${600} renderRow=${renderRow} label="Events, newest first" empty="No event yet." />
  </section>`;
}
