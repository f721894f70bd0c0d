import { Component, render } from './vendor/preact.js';
import { html } from './lib/html.js';
import { DashboardStore } from './lib/store.js';
import { SignIn } from './views/signin.js';
import { ClusterView } from './views/cluster.js';
import { ServerView } from './views/server.js';
import { OrganizationsView } from './views/organizations.js';
import { EventsView } from './views/events.js';
import { ConfirmDialog } from './views/confirm.js';
import { Badge } from './views/parts.js';

const THEME_SLOT = 'fleetplane.dashboard.theme';
const THEMES = ['auto', 'light', 'dark'];

function applyTheme(theme) {
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
}

const STREAM_LABELS = { connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…', refused: 'events refused', off: 'off' };

function Header({ state, store, theme, onTheme }) {
  const { route, identity, stream } = state;
  const link = (href, label, current) => html`<a href=${href} aria-current=${current ? 'page' : undefined}>${label}</a>`;
  return html`<header class="top">
    <a class="skip" href="#main">Skip to content</a>
    <span class="brand">Fleetplane</span>
    <nav aria-label="Views">
      ${link('#/cluster', 'Cluster', route.view === 'cluster')}
      ${link(`#/server/${encodeURIComponent(identity.server)}`, 'Server', route.view === 'server')}
      ${link('#/organizations', 'Organizations', route.view === 'organizations')}
      ${link('#/events', 'Events', route.view === 'events')}
    </nav>
    <span class="stream" role="status">Events: <${Badge} state=${stream} label=${STREAM_LABELS[stream] ?? stream} /></span>
    <button type="button" class="small" onClick=${onTheme} aria-label="Colour theme: ${theme}, change">Theme: ${theme}</button>
    <button type="button" class="small" onClick=${() => store.signOut()}>Sign out</button>
  </header>`;
}

function Notice({ state, store }) {
  const { notice, refreshError } = state;
  return html`<div class="notices">
    ${refreshError ? html`<p class="alert" role="alert">Could not refresh: ${refreshError}. Retrying.</p>` : null}
    ${notice
      ? html`<p class=${notice.kind === 'error' ? 'alert' : 'ok'} role=${notice.kind === 'error' ? 'alert' : 'status'}>${notice.message}
          <button type="button" class="small" onClick=${() => store.dismissNotice()}>Dismiss</button></p>`
      : null}
  </div>`;
}

class App extends Component {
  constructor(props) {
    super(props);
    this.state = { view: props.store.state, theme: localStorage.getItem(THEME_SLOT) ?? 'auto' };
    applyTheme(this.state.theme);
    this.cycleTheme = () => {
      const theme = THEMES[(THEMES.indexOf(this.state.theme) + 1) % THEMES.length];
      localStorage.setItem(THEME_SLOT, theme);
      applyTheme(theme);
      this.setState({ theme });
    };
  }

  componentDidMount() {
    this.unsubscribe = this.props.store.subscribe((view) => this.setState({ view }));
    this.props.store.resume();
  }

  componentWillUnmount() {
    this.unsubscribe?.();
  }

  render({ store }, { view, theme }) {
    if (!view.signedIn) return html`<${SignIn} state=${view} store=${store} />`;
    const View = { cluster: ClusterView, server: ServerView, organizations: OrganizationsView, events: EventsView }[view.route.view];
    return html`<${Header} state=${view} store=${store} theme=${theme} onTheme=${this.cycleTheme} />
      <main id="main" tabindex="-1">
        <${Notice} state=${view} store=${store} />
        <${View} state=${view} store=${store} />
      </main>
      ${view.pending ? html`<${ConfirmDialog} action=${view.pending} busy=${view.busy} onConfirm=${() => store.confirm()} onCancel=${() => store.cancel()} />` : null}`;
  }
}

render(html`<${App} store=${new DashboardStore()} />`, document.getElementById('app'));
