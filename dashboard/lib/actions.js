// Each action is the ordinary control envelope, sent with the signed-in key: the server authorizes and logs
// it as it would any other. No reboot or host shutdown is offered here.

import { count } from './format.js';

const workerName = (server, worker) => `worker ${worker} of ${server}`;

export function workerAction(kind, server, worker, value) {
  const name = workerName(server, worker);
  switch (kind) {
    case 'cordon':
      return value
        ? { title: `Cordon ${name}`, detail: 'It takes no new connections; open ones keep being served.', confirm: 'Cordon', done: `Cordoned ${name}.`, envelopes: [{ method: 'cordon', server, worker, data: true }] }
        : { title: `Uncordon ${name}`, detail: 'It takes new connections again.', confirm: 'Uncordon', done: `Uncordoned ${name}.`, envelopes: [{ method: 'cordon', server, worker, data: false }] };
    case 'drain':
      return value
        ? { title: `Drain ${name}`, detail: 'It takes no new connections and ends its open ones gracefully.', confirm: 'Drain', done: `Draining ${name}.`, envelopes: [{ method: 'drain', server, worker, data: true }] }
        : { title: `Return ${name} to service`, detail: 'It takes connections again.', confirm: 'Return to service', done: `${name} is back in service.`, envelopes: [{ method: 'drain', server, worker, data: false }] };
    case 'restart':
      return { title: `Restart ${name}`, detail: 'A replacement is started first; this worker drains once it is ready.', confirm: 'Restart', done: `Restarting ${name}.`, envelopes: [{ method: 'restart', server, worker }] };
    default:
      throw new Error(`unknown action ${kind}`);
  }
}

export function serverAction(kind, server, value) {
  switch (kind) {
    case 'cordon':
      return value
        ? { title: `Cordon server ${server}`, detail: 'Its workers take no new connections; its primary answers them with the fallback.', confirm: 'Cordon server', done: `Cordoned ${server}.`, envelopes: [{ method: 'cordon', server, master: true, data: true }] }
        : { title: `Uncordon server ${server}`, detail: 'Its workers take new connections again.', confirm: 'Uncordon server', done: `Uncordoned ${server}.`, envelopes: [{ method: 'cordon', server, master: true, data: false }] };
    case 'drain':
      return value
        ? { title: `Drain server ${server}`, detail: 'Every worker stops taking connections and ends its open ones gracefully.', confirm: 'Drain server', done: `Draining ${server}.`, envelopes: [{ method: 'drain', server, master: true, data: true }] }
        : { title: `Return server ${server} to service`, detail: 'Its workers take connections again.', confirm: 'Return to service', done: `${server} is back in service.`, envelopes: [{ method: 'drain', server, master: true, data: false }] };
    case 'rolling':
      // Sent to the workers: `restart` of the primary itself (master: true) is the hand-over to a new primary.
      return { title: `Rolling restart of ${server}`, detail: 'One worker at a time: each replacement is ready before the old worker drains.', confirm: 'Restart workers', done: `Rolling restart of ${server} started.`, envelopes: [{ method: 'restart', server, broadcast: true }] };
    default:
      throw new Error(`unknown action ${kind}`);
  }
}

/** Shed (or stop shedding) one organization on every server: each server's list, with it added or removed. */
export function shedAction(organization, name, servers, shed) {
  const label = name ? `${name} (${organization})` : organization;
  const envelopes = servers.map((server) => {
    const list = new Set(server.shed);
    if (shed) list.add(organization);
    else list.delete(organization);
    return { method: 'shed', server: server.server, master: true, data: { organizations: [...list].sort() } };
  });
  return shed
    ? { title: `Shed ${label}`, detail: `Every server stops serving it: its requests get the fallback and its WebSockets close (1013). ${count(servers.length, 'server')}.`, confirm: 'Shed', done: `Shedding ${label}.`, envelopes }
    : { title: `Stop shedding ${label}`, detail: `Every server serves it again. ${count(servers.length, 'server')}.`, confirm: 'Stop shedding', done: `${label} is served again.`, envelopes };
}

export function autoscalerAction(server, pause) {
  return pause
    ? { title: 'Pause the autoscaler', detail: 'The cluster keeps its size until it is resumed.', confirm: 'Pause', done: 'Autoscaler paused.', envelopes: [{ method: 'autoscaler.pause', server, master: true }] }
    : { title: 'Resume the autoscaler', detail: 'Scaling decisions start again at the next evaluation.', confirm: 'Resume', done: 'Autoscaler resumed.', envelopes: [{ method: 'autoscaler.resume', server, master: true }] };
}

/**
 * What the notice says once every envelope of an action was answered: its `done`, unless a target accepted a
 * change that waits for the readiness grace (`{ accepted: true, effectiveInMs }`): it is not done yet.
 */
export function outcomeMessage(action, results) {
  const waiting = results.flatMap((result) => result.replies).map((reply) => reply.result).find((result) => result && result.accepted === true && typeof result.effectiveInMs === 'number');
  if (!waiting) return action.done;
  return `${action.title}: accepted. It takes effect after the readiness grace (${Math.round(waiting.effectiveInMs / 1000)} s); /readyz answers 503 meanwhile.`;
}
