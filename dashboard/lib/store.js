// The page's state and the loops that keep it fresh: snapshots through `POST /control` every two seconds,
// events live over the WebSocket (or, while it is down, through `overview.events` on the same beat).
import { ControlClient, ControlError, signInMessage } from './api.js';
import { EventStream } from './stream.js';
import { mergeHistory } from './history.js';
import { outcomeMessage } from './actions.js';

export const REFRESH_MS = 2_000;
const KEY_SLOT = 'fleetplane.dashboard.key';
const MAX_EVENTS = 2_000;

export function routeOf(hash) {
  const [view, ...rest] = hash.replace(/^#\/?/, '').split('/');
  if (view === 'server' && rest[0]) return { view: 'server', server: decodeURIComponent(rest[0]) };
  if (view === 'organizations' || view === 'events') return { view };
  return { view: 'cluster' };
}

export class DashboardStore {
  constructor() {
    this.listeners = new Set();
    this.state = {
      signedIn: false,
      signIn: { busy: false, error: null },
      identity: null,
      route: routeOf(location.hash),
      stream: 'off',
      cluster: null,
      server: null,
      history: {},
      events: [],
      filter: { kind: '', server: '', text: '' },
      refreshError: null,
      notice: null,
      pending: null,
      busy: false,
    };
    this.client = undefined;
    this.stream = undefined;
    this.timer = undefined;
    this.cursors = {};
    this.seen = new Set();
    this.historySince = { server: null, at: 0 };
    addEventListener('hashchange', () => {
      // A notice is about the view it was given on.
      this.set({ route: routeOf(location.hash), notice: null });
      this.refreshSoon();
    });
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(patch) {
    this.state = { ...this.state, ...patch };
    for (const listener of this.listeners) listener(this.state);
  }

  /** A key kept in this tab from an earlier sign-in (sessionStorage: gone when the tab closes). */
  resume() {
    const key = sessionStorage.getItem(KEY_SLOT);
    if (key) void this.signIn(key, true);
  }

  async signIn(key, resumed = false) {
    const trimmed = key.trim();
    if (!trimmed) return this.set({ signIn: { busy: false, error: 'Enter a platform key.' } });
    this.set({ signIn: { busy: true, error: null } });
    const client = new ControlClient(trimmed);
    try {
      const summary = await client.one({ method: 'overview.server', master: true, data: { processes: false } });
      this.client = client;
      sessionStorage.setItem(KEY_SLOT, trimmed);
      this.set({ signedIn: true, signIn: { busy: false, error: null }, identity: { server: summary.server, cluster: summary.cluster } });
      this.startStream(trimmed);
      await this.refresh();
    } catch (error) {
      sessionStorage.removeItem(KEY_SLOT);
      const message = error instanceof ControlError ? signInMessage(error) : 'The sign-in failed.';
      this.set({ signIn: { busy: false, error: resumed ? null : message } });
    }
  }

  signOut(reason = null) {
    sessionStorage.removeItem(KEY_SLOT);
    clearTimeout(this.timer);
    this.stream?.stop();
    this.client = undefined;
    this.stream = undefined;
    this.cursors = {};
    this.seen = new Set();
    this.historySince = { server: null, at: 0 };
    this.set({ signedIn: false, identity: null, stream: 'off', cluster: null, server: null, history: {}, events: [], notice: null, pending: null, signIn: { busy: false, error: reason } });
  }

  startStream(key) {
    this.stream = new EventStream(key, {
      event: (entry) => this.addEvents([entry]),
      state: (stream, detail) => this.set({ stream, ...(detail ? { notice: { kind: 'error', message: `Live events refused: ${detail}` } } : {}) }),
      opened: () => void this.fetchEvents(),
    });
    this.stream.start();
  }

  refreshSoon() {
    if (!this.client) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), 50);
  }

  /** One beat: what the current view shows, then the next beat in two seconds. */
  async refresh() {
    clearTimeout(this.timer);
    const client = this.client;
    if (!client) return;
    try {
      const { route } = this.state;
      if (route.view === 'server') await this.refreshServer(client, route.server);
      else if (route.view !== 'events') this.set({ cluster: await client.one({ method: 'overview.cluster', master: true }) });
      if (this.state.stream !== 'live') await this.fetchEvents();
      if (this.client === client) this.set({ refreshError: null });
    } catch (error) {
      if (this.client !== client) return;
      if (error instanceof ControlError && (error.status === 401 || error.status === 403)) return this.signOut(signInMessage(error));
      this.set({ refreshError: error instanceof ControlError ? error.message : String(error) });
    }
    if (this.client === client) this.timer = setTimeout(() => void this.refresh(), REFRESH_MS);
  }

  async refreshServer(client, serverId) {
    const since = this.historySince.server === serverId ? this.historySince.at : 0;
    const snapshot = await client.one({ method: 'overview.server', server: serverId, data: { historySince: since } });
    const history = since === 0 ? {} : this.state.history;
    const merged = mergeHistory(history, snapshot.history ?? {});
    this.historySince = { server: serverId, at: merged.newest || since };
    delete snapshot.history;
    this.set({ server: snapshot, history: merged.series });
  }

  async fetchEvents() {
    const client = this.client;
    const cluster = this.state.identity?.cluster;
    if (!client || !cluster) return;
    try {
      const result = await client.send({ method: 'overview.events', cluster, master: true, data: { since: this.cursors } });
      this.addEvents(result.replies.filter((reply) => reply.ok).flatMap((reply) => reply.result.events));
    } catch {
      // The next beat asks again.
    }
  }

  addEvents(entries) {
    const fresh = entries.filter((entry) => !this.seen.has(`${entry.server}:${entry.seq}`));
    if (fresh.length === 0) return;
    for (const entry of fresh) {
      this.seen.add(`${entry.server}:${entry.seq}`);
      this.cursors[entry.server] = Math.max(this.cursors[entry.server] ?? 0, entry.seq);
    }
    const events = [...fresh, ...this.state.events].sort((a, b) => b.at - a.at || (a.server === b.server ? b.seq - a.seq : 0)).slice(0, MAX_EVENTS);
    this.set({ events });
    // A worker of the server on screen changed: show it now rather than at the next beat.
    const route = this.state.route;
    if (route.view === 'server' && fresh.some((entry) => entry.server === route.server && entry.worker !== undefined)) this.refreshSoon();
  }

  setFilter(patch) {
    this.set({ filter: { ...this.state.filter, ...patch } });
  }

  /** Asks for confirmation of an action: `{ title, detail, envelope | envelopes, done }`. */
  ask(action) {
    this.set({ pending: action, notice: null });
  }

  cancel() {
    this.set({ pending: null });
  }

  async confirm() {
    const action = this.state.pending;
    const client = this.client;
    if (!action || !client) return;
    this.set({ busy: true });
    try {
      const results = [];
      for (const envelope of action.envelopes) results.push(await client.act(envelope));
      this.set({ pending: null, busy: false, notice: { kind: 'ok', message: outcomeMessage(action, results) } });
      this.refreshSoon();
    } catch (error) {
      this.set({ pending: null, busy: false, notice: { kind: 'error', message: `${action.title} was refused: ${error.message}` } });
    }
  }

  dismissNotice() {
    this.set({ notice: null });
  }
}
