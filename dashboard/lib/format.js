// How figures read at a glance.

export function bytes(value) {
  if (value === null || value === undefined) return '–';
  if (value < 1024) return `${value} B`;
  if (value < 1024 ** 2) return `${(value / 1024).toFixed(0)} KiB`;
  if (value < 1024 ** 3) return `${(value / 1024 ** 2).toFixed(0)} MiB`;
  return `${(value / 1024 ** 3).toFixed(1)} GiB`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  const s = ms / 1000;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86_400).toFixed(1)} d`;
}

export function ago(at, now = Date.now()) {
  return `${duration(Math.max(0, now - at))} ago`;
}

export function clock(at) {
  const date = new Date(at);
  return date.toLocaleTimeString(undefined, { hour12: false });
}

export function number(value, digits = 1) {
  if (value === null || value === undefined) return '–';
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

/** `1 server`, `2 servers`, `0 servers`: the plural only when the count is not one. */
export function count(value, singular, plural = `${singular}s`) {
  return `${value} ${value === 1 ? singular : plural}`;
}

export function ms(value) {
  return value === null || value === undefined ? '–' : `${number(value)} ms`;
}
