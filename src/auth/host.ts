const NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;
const IPV6 = /^[0-9a-f:.]+$/;
const PORT = /^\d{1,5}$/;
const MAX_HOST_LENGTH = 253;

/**
 * A host as organizations and keys store it: lower case, no port, no trailing dot, IPv6 without brackets.
 * Accepts a `Host` header (`Example.COM:8080`, `[::1]:8080`) or a configured name (`::1`); anything else is
 * `undefined`, which the caller treats as an unknown host.
 */
export function normalizeHost(raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_HOST_LENGTH + 8) return undefined;
  // Every request names its host, and a server sees few distinct ones: remember the answers, within a bound
  // (the header is the caller's, so the memory must not grow with what callers send).
  if (memo.has(raw)) return memo.get(raw);
  const normalized = normalize(raw);
  if (memo.size >= MEMO_ENTRIES) memo.clear();
  memo.set(raw, normalized);
  return normalized;
}

const MEMO_ENTRIES = 1024;
const memo = new Map<string, string | undefined>();

function normalize(raw: string): string | undefined {
  const host = raw.toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    const rest = host.slice(end + 1);
    if (end < 0 || (rest !== '' && !(rest.startsWith(':') && PORT.test(rest.slice(1))))) return undefined;
    const address = host.slice(1, end);
    return address.includes(':') && IPV6.test(address) ? address : undefined;
  }
  const colons = host.split(':').length - 1;
  if (colons > 1) return IPV6.test(host) ? host : undefined;
  let name = host;
  if (colons === 1) {
    const [hostname, port] = host.split(':');
    if (!PORT.test(port!)) return undefined;
    name = hostname!;
  }
  if (name.endsWith('.')) name = name.slice(0, -1);
  return name.length > 0 && name.length <= MAX_HOST_LENGTH && NAME.test(name) ? name : undefined;
}

/** Normalizes configured hosts, refusing the whole list when one is not a host name. */
export function normalizeHosts(hosts: readonly string[]): string[] | undefined {
  const normalized = hosts.map(normalizeHost);
  if (normalized.some((host) => host === undefined)) return undefined;
  return [...new Set(normalized as string[])];
}
