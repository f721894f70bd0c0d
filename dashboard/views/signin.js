import { Component } from '../vendor/preact.js';
import { html } from '../lib/html.js';

/** The page everyone sees first: a platform key is required, typed once for this tab. */
export class SignIn extends Component {
  constructor(props) {
    super(props);
    this.submit = (event) => {
      event.preventDefault();
      const input = event.currentTarget.elements.namedItem('key');
      const key = input.value;
      input.value = '';
      props.store.signIn(key);
    };
  }

  render({ state }) {
    const { busy, error } = state.signIn;
    return html`<main class="signin" id="main">
      <h1>Fleetplane</h1>
      <section class="card" aria-labelledby="signin-title">
        <h2 id="signin-title">Platform key required</h2>
        <p>The fleet dashboard shows and steers every server of this cluster. Sign in with a key of the platform organization, the one that owns this server.</p>
        ${error ? html`<p class="alert" role="alert" id="signin-error">${error}</p>` : null}
        <form onSubmit=${this.submit} autocomplete="off">
          <label for="key">Platform key</label>
          <input id="key" name="key" type="password" autocomplete="off" spellcheck="false" required aria-describedby="key-help ${error ? 'signin-error' : ''}" />
          <p class="help" id="key-help">Kept in this tab only (session storage) and sent as a Bearer token; never in a URL.</p>
          <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
        </form>
      </section>
    </main>`;
  }
}
