import { html } from '../lib/html.js';

/**
 * A small line of the last ten minutes of one figure, drawn as SVG (nothing inline to allow in the page's
 * policy). Its text alternative says what a sighted reader takes from it: lowest, highest and latest.
 */
export function Sparkline({ label, at = [], values = [], format = String, width = 72, height = 24 }) {
  const points = [];
  for (let i = 0; i < values.length; i++) if (values[i] !== null && values[i] !== undefined) points.push([at[i], values[i]]);
  if (points.length < 2) return html`<span class="spark-empty" aria-hidden="true"></span>`;
  const t0 = points[0][0];
  const t1 = points[points.length - 1][0];
  const low = Math.min(...points.map((point) => point[1]));
  const high = Math.max(...points.map((point) => point[1]));
  const x = (t) => (t1 === t0 ? width : ((t - t0) / (t1 - t0)) * (width - 2) + 1);
  const y = (v) => (high === low ? height / 2 : height - 2 - ((v - low) / (high - low)) * (height - 4));
  const line = points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  const latest = points[points.length - 1][1];
  const description = `${label}, last ${Math.max(1, Math.round((t1 - t0) / 60_000))} min: low ${format(low)}, high ${format(high)}, now ${format(latest)}`;
  return html`<svg class="spark" viewBox="0 0 ${width} ${height}" width=${width} height=${height} role="img" aria-label=${description}>
    <title>${description}</title>
    <polyline points=${line} fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke" />
  </svg>`;
}
