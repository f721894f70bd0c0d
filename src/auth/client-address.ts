import { BlockList, isIP } from 'node:net';

const MAPPED_IPV4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;
const WITH_PORT_IPV4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/;
const BRACKETED_IPV6 = /^\[([^\]]+)\](?::\d+)?$/;

/** `::ffff:10.0.0.1` is `10.0.0.1`: a dual-stack socket reports IPv4 peers in their mapped form. */
export function normalizeAddress(address: string): string {
  return MAPPED_IPV4.exec(address)?.[1] ?? address;
}

/** One `X-Forwarded-For` hop as an address, or undefined when it is none (`unknown`, a host name, garbage). */
function forwardedHop(hop: string): string | undefined {
  const bare = BRACKETED_IPV6.exec(hop)?.[1] ?? WITH_PORT_IPV4.exec(hop)?.[1] ?? hop;
  return isIP(bare) ? normalizeAddress(bare) : undefined;
}

/** An address or a CIDR range (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`), or undefined when `entry` is neither. */
export function addressRange(entry: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', prefixText, extra] = entry.trim().split('/');
  const version = isIP(address);
  if (version === 0 || extra !== undefined) return undefined;
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (!(prefix >= 0 && prefix <= bits)) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * The proxies whose `X-Forwarded-For` is believed (`http.trustProxy`). The client is the rightmost forwarded
 * address that is not itself a trusted proxy: every hop to its right was appended by a proxy we trust, while
 * anything further left was written by the client and may be a lie.
 */
export class TrustedProxies {
  private readonly ranges: BlockList | undefined;

  /** Throws on an entry that is neither an address nor a CIDR range (config validation names the field first). */
  constructor(entries: readonly string[] = []) {
    if (entries.length === 0) return;
    this.ranges = new BlockList();
    for (const entry of entries) {
      const range = addressRange(entry);
      if (!range) throw new Error(`not an address or CIDR range: ${entry}`);
      this.ranges.addSubnet(range.address, range.prefix, range.family);
    }
  }

  trusts(address: string): boolean {
    if (!this.ranges) return false;
    const version = isIP(address);
    return version !== 0 && this.ranges.check(address, version === 4 ? 'ipv4' : 'ipv6');
  }

  /**
   * The client's address: the socket's peer, or, when that peer is a trusted proxy, the rightmost forwarded
   * address not itself trusted. `unknown` when the socket has no address (it closed).
   */
  clientAddress(remoteAddress: string | undefined, forwardedFor: string | string[] | undefined): string {
    let client = remoteAddress === undefined ? 'unknown' : normalizeAddress(remoteAddress);
    if (!this.ranges || forwardedFor === undefined || !this.trusts(client)) return client;
    const hops = (typeof forwardedFor === 'string' ? forwardedFor : forwardedFor.join(',')).split(',');
    for (let index = hops.length - 1; index >= 0; index--) {
      const hop = forwardedHop(hops[index]!.trim());
      // A hop that is not an address ends the chain: the last trusted proxy is as far as we can see.
      if (hop === undefined) return client;
      client = hop;
      if (!this.trusts(hop)) return hop;
    }
    return client;
  }
}

/**
 * The key failed authentications are counted under: the address itself, except that IPv6 addresses count per
 * /64 — one host is usually given a whole /64, so counting single addresses would let it rotate freely.
 */
export function failureKey(address: string): string {
  if (isIP(address) !== 6) return address;
  const [head = '', tail] = address.toLowerCase().split('::');
  const groups = head ? head.split(':') : [];
  if (tail !== undefined) {
    const rest = tail ? tail.split(':') : [];
    // An embedded IPv4 tail (`::1.2.3.4`) takes two groups; only the first four matter here.
    const restGroups = rest.reduce((count, group) => count + (group.includes('.') ? 2 : 1), 0);
    groups.push(...Array<string>(Math.max(0, 8 - groups.length - restGroups)).fill('0'), ...rest);
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
