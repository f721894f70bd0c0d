import { html } from '../lib/html.js';
import { ago, bytes, duration, ms, number } from '../lib/format.js';
import { serverAction, workerAction } from '../lib/actions.js';
import { ActionButton, Badge, Scroller } from './parts.js';
import { Sparkline } from './sparkline.js';

/** A crash this recent is shown on its worker's row, even if the replacement is already serving. */
const RECENT_CRASH_MS = 5 * 60_000;

function Figure({ value, format, series, figure, label }) {
  return html`<span class="figure"><span>${format(value)}</span><${Sparkline} label=${label} at=${series?.at} values=${series?.values[figure]} format=${format} /></span>`;
}

function WorkerRow({ entry, server, series, store, now }) {
  const name = `worker ${entry.worker} of ${server}`;
  const crashed = entry.lastCrash && now - entry.lastCrash.at < RECENT_CRASH_MS ? entry.lastCrash : null;
  const cordoned = entry.status === 'cordoned';
  const draining = entry.status === 'draining';
  const idle = entry.retiring !== null;
  return html`<tr data-worker=${entry.worker} data-pid=${entry.pid}>
    <th scope="row">${entry.worker}</th>
    <td class="num">${entry.pid}</td>
    <td class="state">
      <${Badge} state=${entry.status} />
      ${entry.retiring ? html` <${Badge} state="stopping" label="retiring: ${entry.retiring}" />` : null}
      ${entry.quarantined ? html` <${Badge} state="crashed" label="quarantined" />` : null}
      ${crashed ? html` <span class="crash">crashed ${ago(crashed.at, now)} (pid ${crashed.pid}, ${crashed.exit})</span>` : null}
    </td>
    <td class="num">${duration(entry.uptimeMs)}</td>
    <td class="num">${entry.restarts}</td>
    <td><${Figure} value=${entry.rssBytes} format=${bytes} series=${series} figure="rssBytes" label="RSS of ${name}" /></td>
    <td><${Figure} value=${entry.heapUsedBytes} format=${bytes} series=${series} figure="heapUsedBytes" label="Heap of ${name}" /></td>
    <td><${Figure} value=${entry.eventLoopLagMs} format=${ms} series=${series} figure="eventLoopLagMs" label="Event-loop lag of ${name}" /></td>
    <td class="num">${entry.connections ?? '–'}</td>
    <td class="num">${number(entry.requestsPerSecond)}</td>
    <td class="actions">
      <${ActionButton} label=${cordoned ? 'Uncordon' : 'Cordon'} title="${cordoned ? 'Uncordon' : 'Cordon'} ${name}" disabled=${idle || draining} onClick=${() => store.ask(workerAction('cordon', server, entry.worker, !cordoned))} />
      <${ActionButton} label=${draining ? 'Undrain' : 'Drain'} title="${draining ? 'Return to service' : 'Drain'} ${name}" disabled=${idle} onClick=${() => store.ask(workerAction('drain', server, entry.worker, !draining))} />
      <${ActionButton} label="Restart" title="Restart ${name}" disabled=${idle} onClick=${() => store.ask(workerAction('restart', server, entry.worker))} />
    </td>
  </tr>`;
}

/** One server: readiness, supervision and every worker with the last ten minutes of its figures. */
export function ServerView({ state, store }) {
  const { server, history, route } = state;
  if (!server || server.server !== route.server) return html`<p class="muted" role="status">Loading server ${route.server}…</p>`;
  const now = Date.now();
  const { workers } = server;
  const own = history.server;
  const allCordoned = workers.target > 0 && workers.cordoned >= workers.target;
  return html`<section aria-labelledby="server-title">
    <h1 id="server-title">Server ${server.server}</h1>
    <dl class="facts">
      <div><dt>State</dt><dd><${Badge} state=${server.status} /></dd></div>
      <div><dt>Readiness</dt><dd><${Badge} state=${server.ready ? 'ready' : 'fallback'} label=${server.ready ? 'ready (/readyz 200)' : 'not ready (/readyz 503)'} /></dd></div>
      <div><dt>Workers ready</dt><dd>${workers.active}/${workers.target}</dd></div>
      <div><dt>Circuit breaker</dt><dd>${workers.breaker.tripped ? html`<${Badge} state="crashed" label="tripped" />` : html`<${Badge} state="ready" label="closed" />`} ${workers.breaker.count} recent crashes</dd></div>
      <div><dt>Quarantined</dt><dd>${workers.quarantined}</dd></div>
      <div><dt>Restarts pending</dt><dd>${workers.restartsPending}</dd></div>
      <div><dt>Host</dt><dd>${server.host} (pid ${server.pid})</dd></div>
      <div><dt>Version</dt><dd>${server.version}</dd></div>
      <div><dt>Uptime</dt><dd>${duration(server.uptimeMs)}</dd></div>
      <div><dt>Req/s</dt><dd><${Figure} value=${server.requestsPerSecond} format=${number} series=${own} figure="requestsPerSecond" label="Requests per second of ${server.server}" /></dd></div>
      <div><dt>Connections</dt><dd><${Figure} value=${server.connections} format=${String} series=${own} figure="connections" label="Connections of ${server.server}" /></dd></div>
      <div><dt>RSS</dt><dd><${Figure} value=${server.rssBytes} format=${bytes} series=${own} figure="rssBytes" label="RSS of ${server.server}" /></dd></div>
      ${server.shed.length ? html`<div><dt>Shedding</dt><dd>${server.shed.join(', ')}</dd></div>` : null}
    </dl>
    <div class="toolbar">
      <${ActionButton} label=${allCordoned ? 'Uncordon server' : 'Cordon server'} title="${allCordoned ? 'Uncordon' : 'Cordon'} server ${server.server}" onClick=${() => store.ask(serverAction('cordon', server.server, !allCordoned))} />
      <${ActionButton} label="Drain server" title="Drain server ${server.server}" onClick=${() => store.ask(serverAction('drain', server.server, true))} />
      <${ActionButton} label="Rolling restart" title="Rolling restart of server ${server.server}" onClick=${() => store.ask(serverAction('rolling', server.server))} />
    </div>
    <h2>Workers</h2>
    <${Scroller} label="Workers of ${server.server}">
      <table class="grid">
        <caption class="visually-hidden">Workers of server ${server.server}</caption>
        <thead><tr><th scope="col">Worker</th><th scope="col">PID</th><th scope="col">State</th><th scope="col">Uptime</th><th scope="col">Restarts</th><th scope="col">RSS</th><th scope="col">Heap</th><th scope="col">Lag</th><th scope="col">Connections</th><th scope="col">Req/s</th><th scope="col">Actions</th></tr></thead>
        <tbody>${(server.processes ?? []).map((entry) => html`<${WorkerRow} key=${entry.pid} entry=${entry} server=${server.server} series=${history[String(entry.pid)]} store=${store} now=${now} />`)}</tbody>
      </table>
    <//>
  </section>`;
}
