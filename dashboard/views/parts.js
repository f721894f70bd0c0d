import { html } from '../lib/html.js';

const TONES = { ready: 'good', running: 'good', live: 'good', cordoned: 'warn', draining: 'warn', degraded: 'warn', starting: 'info', connecting: 'info', reconnecting: 'warn', fallback: 'bad', stopping: 'bad', stopped: 'bad', crashed: 'bad', refused: 'bad' };

/** A state as a word with a colour; the word alone carries the meaning. */
export function Badge({ state, label }) {
  return html`<span class="badge ${TONES[state] ?? 'info'}">${label ?? state}</span>`;
}

/** A wide table that scrolls sideways on a narrow screen, reachable with the keyboard. */
export function Scroller({ label, children }) {
  return html`<div class="scroller" tabindex="0" role="region" aria-label=${label}>${children}</div>`;
}

export function ActionButton({ label, title, onClick, disabled }) {
  return html`<button type="button" class="small" aria-label=${title} title=${title} onClick=${onClick} disabled=${disabled}>${label}</button>`;
}
