import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { addressRange } from '../auth/client-address.js';
import { EGRESS_HOST_NAME, hostNameKey } from '../config/guards.js';

/**
 * Where a tenant's provider may not connect (SPEC 10.4), each range under the rule a refusal names. Public
 * addresses are what is left: these are the ranges that reach this host, its network or its cloud's services.
 */
const REFUSED_RANGES: ReadonlyArray<readonly [rule: EgressRule, address: string, prefix: number]> = [
  ['unspecified', '0.0.0.0', 8],
  ['unspecified', '::', 128],
  ['loopback', '127.0.0.0', 8],
  ['loopback', '::1', 128],
  ['private', '10.0.0.0', 8],
  ['private', '172.16.0.0', 12],
  ['private', '192.168.0.0', 16],
  // Carrier-grade NAT space is private in practice: clouds put internal services there.
  ['private', '100.64.0.0', 10],
  ['private', '192.0.0.0', 24],
  ['private', '198.18.0.0', 15],
  ['link-local', '169.254.0.0', 16],
  ['link-local', 'fe80::', 10],
  ['unique-local', 'fc00::', 7],
  // Site-local addresses were deprecated in favour of unique-local ones but still route inside some sites.
  ['unique-local', 'fec0::', 10],
  ['multicast', '224.0.0.0', 4],
  ['multicast', 'ff00::', 8],
  ['reserved', '240.0.0.0', 4],
];

export type EgressRule = 'unspecified' | 'loopback' | 'private' | 'link-local' | 'unique-local' | 'multicast' | 'reserved' | 'own-address';

export const EGRESS_RULES: readonly EgressRule[] = ['unspecified', 'loopback', 'private', 'link-local', 'unique-local', 'multicast', 'reserved', 'own-address'];

/** An `egress.allow` entry: an address, a CIDR range, a host name or `*.` and a domain; undefined when none. */
export function allowEntry(entry: string): { kind: 'range'; address: string; prefix: number; family: 'ipv4' | 'ipv6' } | { kind: 'host'; name: string } | undefined {
  const range = addressRange(entry);
  if (range) return { kind: 'range', ...range };
  const name = hostNameKey(entry);
  return EGRESS_HOST_NAME.test(name) ? { kind: 'host', name } : undefined;
}

/** The eight 16-bit groups of an IPv6 address (a dotted IPv4 tail included); undefined when it is not one. */
function ipv6Groups(address: string): number[] | undefined {
  let text = address;
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail, extra] = text.split('::');
  if (extra !== undefined) return undefined;
  const parse = (part: string) => (part ? part.split(':').map((group) => Number.parseInt(group, 16)) : []);
  const first = parse(head);
  const last = tail === undefined ? [] : parse(tail);
  const missing = 8 - first.length - last.length;
  if (missing < 0 || (tail === undefined && missing !== 0)) return undefined;
  return [...first, ...Array<number>(missing).fill(0), ...last];
}

/**
 * The IPv4 address an IPv6 one carries inside it and that a host may reach through it: IPv4-compatible
 * (`::a.b.c.d`), the NAT64 prefix (`64:ff9b::/96`) and 6to4 (`2002::/16`). Mapped addresses (`::ffff:a.b.c.d`)
 * are matched by the IPv4 ranges already.
 */
function embeddedIpv4(groups: readonly number[]): string | undefined {
  const dotted = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0 && (g6 !== 0 || g7 > 1)) return dotted(g6, g7);
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return dotted(g6, g7);
  if (g0 === 0x2002) return dotted(g1, g2);
  return undefined;
}

/** One spelling per address, so the host's own addresses compare whatever form a resolver returned. */
function canonical(address: string): string {
  const bare = address.split('%')[0]!;
  if (isIP(bare) !== 6) return bare;
  const groups = ipv6Groups(bare);
  if (!groups) return bare.toLowerCase();
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  return groups.map((group) => group.toString(16)).join(':');
}

export interface EgressPolicyOptions {
  /** `egress.allow`: addresses, CIDR ranges and host names (`*.example.internal` for a domain's hosts). */
  allow?: readonly string[];
  /** The addresses of this host; read from its interfaces by default (again after `ownAddressesTtlMs`). */
  ownAddresses?: () => Iterable<string>;
  now?: () => number;
}

const OWN_ADDRESSES_TTL_MS = 5_000;

function interfaceAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((entries) => (entries ?? []).map((entry) => entry.address));
}

/**
 * Which addresses a tenant's provider may connect to. A refusal names its rule; an address allowed by
 * `egress.allow` (or reached through an allowed host name) is never refused.
 */
export class EgressPolicy {
  private readonly refused = new Map<EgressRule, BlockList>();
  private readonly allowed = new BlockList();
  private readonly allowedHosts = new Set<string>();
  private readonly allowedDomains: string[] = [];
  private readonly ownAddresses: () => Iterable<string>;
  private readonly now: () => number;
  private own: { readAt: number; addresses: Set<string> } | undefined;

  /** Throws on an entry that is none of an address, a range or a host name (config validation names it first). */
  constructor(options: EgressPolicyOptions = {}) {
    for (const [rule, address, prefix] of REFUSED_RANGES) {
      let list = this.refused.get(rule);
      if (!list) this.refused.set(rule, (list = new BlockList()));
      list.addSubnet(address, prefix, isIP(address) === 4 ? 'ipv4' : 'ipv6');
    }
    for (const text of options.allow ?? []) {
      const entry = allowEntry(text);
      if (!entry) throw new Error(`not an address, CIDR range or host name: ${text}`);
      if (entry.kind === 'range') this.allowed.addSubnet(entry.address, entry.prefix, entry.family);
      else if (entry.name.startsWith('*.')) this.allowedDomains.push(entry.name.slice(1));
      else this.allowedHosts.add(entry.name);
    }
    this.ownAddresses = options.ownAddresses ?? interfaceAddresses;
    this.now = options.now ?? Date.now;
  }

  /** Whether `egress.allow` names this host, so whatever it resolves to is the platform's intent. */
  allowsHost(hostname: string): boolean {
    const name = hostNameKey(hostname.replace(/^\[|\]$/g, ''));
    return this.allowedHosts.has(name) || this.allowedDomains.some((domain) => name.endsWith(domain));
  }

  /** The rule that refuses a connection to `address`, or undefined when it may be connected to. */
  refusal(address: string): EgressRule | undefined {
    const bare = address.split('%')[0]!;
    const family = isIP(bare);
    if (family === 0) return 'unspecified';
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (this.allowed.check(bare, type)) return undefined;
    for (const [rule, list] of this.refused) if (list.check(bare, type)) return rule;
    if (family === 6) {
      const groups = ipv6Groups(bare);
      const inner = groups && embeddedIpv4(groups);
      if (inner !== undefined) return this.refusal(inner);
    }
    return this.isOwnAddress(bare) ? 'own-address' : undefined;
  }

  private isOwnAddress(address: string): boolean {
    const now = this.now();
    if (!this.own || now - this.own.readAt >= OWN_ADDRESSES_TTL_MS) {
      this.own = { readAt: now, addresses: new Set([...this.ownAddresses()].map(canonical)) };
    }
    return this.own.addresses.has(canonical(address));
  }
}
