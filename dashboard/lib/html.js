import { h } from '../vendor/preact.js';
import htm from '../vendor/htm.js';

/** JSX-like templates without a build step: html`<p>${text}</p>`. */
export const html = htm.bind(h);
