import { Component } from '../vendor/preact.js';
import { html } from '../lib/html.js';

/**
 * A list that renders only the rows in view (plus a margin), for lists of thousands: fixed row height, one
 * scrolling box. Rows keep their list position for assistive technology (`aria-setsize`, `aria-posinset`).
 */
export class VirtualList extends Component {
  constructor(props) {
    super(props);
    this.state = { top: 0, height: props.viewHeight ?? 480 };
    this.onScroll = (event) => this.setState({ top: event.currentTarget.scrollTop });
  }

  render({ items, rowHeight = 44, viewHeight = 480, renderRow, label, empty }) {
    if (items.length === 0) return html`<p class="empty">${empty}</p>`;
    const margin = 8;
    const first = Math.max(0, Math.floor(this.state.top / rowHeight) - margin);
    const last = Math.min(items.length, Math.ceil((this.state.top + viewHeight) / rowHeight) + margin);
    const rows = [];
    for (let index = first; index < last; index++) {
      rows.push(html`<li class="vrow" key=${items[index].key} aria-setsize=${items.length} aria-posinset=${index + 1} style=${{ top: `${index * rowHeight}px`, height: `${rowHeight}px` }}>
        ${renderRow(items[index], index)}
      </li>`);
    }
    return html`<div class="vlist" tabindex="0" role="region" aria-label=${label} onScroll=${this.onScroll} style=${{ maxHeight: `${viewHeight}px` }}>
      <ul class="vlist-body" style=${{ height: `${items.length * rowHeight}px` }}>${rows}</ul>
    </div>`;
  }
}
