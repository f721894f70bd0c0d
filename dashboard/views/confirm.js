import { Component, createRef } from '../vendor/preact.js';
import { html } from '../lib/html.js';

/** The confirmation every action passes through: a modal dialog (focus kept inside, Escape cancels). */
export class ConfirmDialog extends Component {
  constructor(props) {
    super(props);
    this.dialog = createRef();
    this.cancelButton = createRef();
  }

  componentDidMount() {
    this.dialog.current?.showModal();
    this.cancelButton.current?.focus();
  }

  render({ action, busy, onConfirm, onCancel }) {
    return html`<dialog ref=${this.dialog} class="confirm" aria-labelledby="confirm-title" aria-describedby="confirm-detail"
        onCancel=${(event) => { event.preventDefault(); if (!busy) onCancel(); }}>
      <h2 id="confirm-title">${action.title}?</h2>
      <p id="confirm-detail">${action.detail}</p>
      <div class="dialog-buttons">
        <button type="button" ref=${this.cancelButton} onClick=${onCancel} disabled=${busy}>Cancel</button>
        <button type="button" class="danger" onClick=${onConfirm} disabled=${busy}>${busy ? 'Working…' : action.confirm}</button>
      </div>
    </dialog>`;
  }
}
