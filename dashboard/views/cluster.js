import { html } from '../lib/html.js';
import { bytes, count, duration, number } from '../lib/format.js';
import { serverAction, autoscalerAction } from '../lib/actions.js';
import { ActionButton, Badge, Scroller } from './parts.js';

function ServerRow({ entry, store }) {
  const { workers } = entry;
  const allCordoned = workers.target > 0 && workers.cordoned >= workers.target;
  return html`<tr>
    <th scope="row"><a href="#/server/${encodeURIComponent(entry.server)}">${entry.server}</a></th>
    <td>${entry.host}</td>
    <td>${entry.version}</td>
    <td><${Badge} state=${entry.status} />${entry.ready ? null : html` <${Badge} state="fallback" label="not ready" />`}${workers.breaker.tripped ? html` <${Badge} state="crashed" label="breaker tripped" />` : null}</td>
    <td class="num">${duration(entry.uptimeMs)}</td>
    <td class="num">${workers.active}/${workers.target}${workers.cordoned ? html` <span class="muted">(${workers.cordoned} cordoned)</span>` : null}</td>
    <td class="num">${entry.connections}</td>
    <td class="num">${number(entry.requestsPerSecond)}</td>
    <td class="num">${bytes(entry.rssBytes)}</td>
    <td class="actions">
      <${ActionButton} label=${allCordoned ? 'Uncordon' : 'Cordon'} title="${allCordoned ? 'Uncordon' : 'Cordon'} server ${entry.server}" onClick=${() => store.ask(serverAction('cordon', entry.server, !allCordoned))} />
      <${ActionButton} label="Drain" title="Drain server ${entry.server}" onClick=${() => store.ask(serverAction('drain', entry.server, true))} />
      <${ActionButton} label="Restart" title="Rolling restart of server ${entry.server}" onClick=${() => store.ask(serverAction('rolling', entry.server))} />
    </td>
  </tr>`;
}

function Autoscaler({ cluster, store }) {
  const deciding = cluster.servers.find((entry) => entry.server === cluster.deciding);
  const any = cluster.servers.find((entry) => entry.autoscaler);
  const status = deciding?.autoscaler ?? any?.autoscaler;
  if (!status) return html`<section class="card" aria-labelledby="autoscaler-title"><h2 id="autoscaler-title">Autoscaler</h2><p class="muted">Off on every server of this cluster.</p></section>`;
  const { policy, lastDecision, lastAction, paused } = status;
  return html`<section class="card" aria-labelledby="autoscaler-title">
    <h2 id="autoscaler-title">Autoscaler</h2>
    <dl class="facts">
      <div><dt>Decides</dt><dd>${cluster.deciding ?? 'no server yet'}</dd></div>
      <div><dt>State</dt><dd><${Badge} state=${paused ? 'cordoned' : 'running'} label=${paused ? 'paused' : 'running'} /></dd></div>
      <div><dt>Size</dt><dd>${lastDecision ? lastDecision.current : '–'}</dd></div>
      <div><dt>Desired</dt><dd>${lastDecision ? lastDecision.desired : '–'}</dd></div>
      <div><dt>Last decision</dt><dd>${lastDecision ? `${lastDecision.action} (${lastDecision.reason})` : 'none yet'}</dd></div>
      <div><dt>Last action</dt><dd>${lastAction ? `${lastAction.action}${lastAction.serverId ? ` ${lastAction.serverId}` : ''}: ${lastAction.outcome ?? 'running'}` : 'none'}</dd></div>
      ${policy ? html`<div><dt>Policy</dt><dd>${policy.minClusterSize}–${count(policy.maxClusterSize, 'server')}, CPU ${policy.cpu.scaleInBelow}–${policy.cpu.scaleOutAbove} %, memory ${policy.memory.scaleInBelow}–${policy.memory.scaleOutAbove} %, cooldown ${duration(policy.cooldownMs)}</dd></div>` : null}
    </dl>
    <${ActionButton} label=${paused ? 'Resume' : 'Pause'} title=${paused ? 'Resume the autoscaler' : 'Pause the autoscaler'} onClick=${() => store.ask(autoscalerAction(status.serverId, !paused))} />
  </section>`;
}

/** Every server of the cluster, as its primary reports it through the mesh. */
export function ClusterView({ state, store }) {
  const { cluster } = state;
  if (!cluster) return html`<p class="muted" role="status">Loading the cluster…</p>`;
  const unreachable = [...cluster.missing, ...cluster.failed.map((entry) => entry.server)];
  return html`<section aria-labelledby="cluster-title">
    <h1 id="cluster-title">Cluster ${cluster.cluster}</h1>
    <p class="muted">${count(cluster.servers.length, 'server')}, seen through ${cluster.via}.</p>
    ${unreachable.length ? html`<p class="alert" role="alert">No answer from ${unreachable.join(', ')}.</p>` : null}
    <${Scroller} label="Servers">
      <table class="grid">
        <caption class="visually-hidden">Servers of cluster ${cluster.cluster}</caption>
        <thead><tr><th scope="col">Server</th><th scope="col">Host</th><th scope="col">Version</th><th scope="col">State</th><th scope="col">Uptime</th><th scope="col">Workers ready</th><th scope="col">Connections</th><th scope="col">Req/s</th><th scope="col">RSS</th><th scope="col">Actions</th></tr></thead>
        <tbody>${cluster.servers.map((entry) => html`<${ServerRow} key=${entry.server} entry=${entry} store=${store} />`)}</tbody>
      </table>
    <//>
    <${Autoscaler} cluster=${cluster} store=${store} />
  </section>`;
}
