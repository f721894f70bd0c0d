import { isIP } from 'node:net';
import { ConfigError } from './errors.js';

/**
 * Flags that load or run code, attach a debugger, or make every worker write diagnostics (or TLS keys) to
 * disk. A JSON config must not be a way to run arbitrary code in every worker.
 */
const FORBIDDEN_EXEC_ARGV = [
  /^--require(=|$)/, /^-r$/, /^--eval(=|$)/, /^-e$/, /^--print(=|$)/, /^-p$/, /^-pe$/,
  /^--inspect/, /^--debug/, /^--import(=|$)/, /^--loader(=|$)/, /^--experimental-loader(=|$)/,
  /^--experimental-default-type/, /^--tls-keylog/, /^--cpu-prof/, /^--heap-prof/, /^--heapsnapshot/,
  /^--report-/, /^--diagnostic-dir/, /^--redirect-warnings/, /^--prof(=|$|-)/, /^--env-file/, /^--watch/,
  /^--experimental-vm-modules/, /^--allow-/, /^--experimental-permission/, /^--snapshot-blob/, /^--build-snapshot/,
];

const FORBIDDEN_ENV_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

export function assertSafeExecArgv(execArgv: readonly string[], field = 'workers.execArgv'): void {
  execArgv.forEach((flag, index) => {
    if (FORBIDDEN_EXEC_ARGV.some((pattern) => pattern.test(flag))) {
      throw new ConfigError(`${field}[${index}]`, `flag "${flag}" is refused: it loads code, attaches a debugger or writes diagnostics in every worker`);
    }
  });
}

/** Own keys only: `JSON.parse` creates a real own `__proto__` key, which is exactly what must be refused. */
export function assertSafeEnv(env: Record<string, unknown>, field = 'workers.env'): void {
  for (const key of Object.keys(env)) {
    if (FORBIDDEN_ENV_KEYS.has(key)) throw new ConfigError(`${field}.${key}`, `environment key "${key}" is refused`);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new ConfigError(`${field}.${key}`, `"${key}" is not a valid environment variable name`);
    if (typeof env[key] !== 'string') throw new ConfigError(`${field}.${key}`, 'environment values must be strings');
  }
}

export function nodeOptionsWarning(env: Record<string, string>): string | undefined {
  return 'NODE_OPTIONS' in env
    ? 'workers.env.NODE_OPTIONS can carry --require and bypass the execArgv guard; prefer workers.execArgv'
    : undefined;
}

function isAddressRange(entry: string): boolean {
  const [address = '', prefix, extra] = entry.split('/');
  const version = isIP(address);
  return version !== 0 && extra === undefined && (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128)));
}

/** Each entry an IPv4 or IPv6 address, optionally with a CIDR prefix (`10.0.0.0/8`, `fd00::/8`). */
export function assertAddressRanges(entries: readonly string[], field = 'http.trustProxy'): void {
  entries.forEach((entry, index) => {
    if (!isAddressRange(entry)) throw new ConfigError(`${field}[${index}]`, `"${entry}" is not an IP address or CIDR range`);
  });
}

/** A DNS host name in lower case, without the root's dot; `*.` before it stands for every host of that domain. */
export const EGRESS_HOST_NAME = /^(\*\.)?(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** Host names compare without case and without the root's trailing dot. */
export const hostNameKey = (name: string): string => name.trim().toLowerCase().replace(/\.$/, '');

/** `egress.allow`: each entry an address, a CIDR range, a host name or `*.` and a domain. */
export function assertEgressAllow(entries: readonly string[], field = 'egress.allow'): void {
  entries.forEach((entry, index) => {
    if (!isAddressRange(entry.trim()) && !EGRESS_HOST_NAME.test(hostNameKey(entry))) {
      throw new ConfigError(`${field}[${index}]`, `"${entry}" is not an IP address, CIDR range or host name (*.domain for its hosts)`);
    }
  });
}

/**
 * `fallback.redirect` is the base of the 307's `Location`: without a scheme (`lb.example.com`) clients resolve it
 * against this node and come straight back, so only an absolute http(s) URL is accepted.
 */
export function assertRedirectUrl(value: string | undefined, source?: string, field = 'fallback.redirect'): void {
  if (value === undefined) return;
  let absolute = /^https?:\/\//i.test(value);
  try {
    absolute &&= new URL(value).hostname !== '';
  } catch {
    absolute = false;
  }
  if (!absolute) throw new ConfigError(field, `must be an absolute http:// or https:// URL, e.g. https://lb.example.com (got ${JSON.stringify(value)})`, source);
}
