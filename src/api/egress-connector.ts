import { lookup as dnsLookup } from 'node:dns';
import { isIP } from 'node:net';
import type { buildConnector } from 'undici';
import type { EgressPolicy, EgressRule } from './egress.js';

/** A connection the egress policy refused, before any socket was opened. */
export class EgressRefusedError extends Error {
  readonly code = 'EGRESS_REFUSED';
  constructor(
    readonly rule: EgressRule,
    /** What the provider named: a host name or an address. */
    readonly hostname: string,
    /** The address refused; the same as `hostname` when that is an address. */
    readonly address: string,
  ) {
    super(`egress to ${hostname} refused (${rule})`);
  }
}

/** Every address a host name resolves to, as the system resolver answers (`/etc/hosts` included). */
export type ResolveAll = (hostname: string) => Promise<string[]>;

export const systemResolveAll: ResolveAll = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, order: 'verbatim' }, (error, addresses) => (error ? reject(error) : resolve(addresses.map((entry) => entry.address))));
  });

/**
 * An undici connector that checks the address it is about to connect to (SPEC 10.4). A host name is resolved
 * here, once per connection, and the socket is opened to exactly the address that was checked: an answer that
 * changes between the check and the connection (DNS rebinding) never reaches the socket. Every address the
 * name resolves to must pass; they are tried in the resolver's order. TLS still verifies the provider's host
 * name (it is the server name), not the address.
 */
export function guardedConnector(policy: EgressPolicy, connect: buildConnector.connector, resolveAll: ResolveAll = systemResolveAll): buildConnector.connector {
  return (options, callback) => {
    const hostname = options.hostname.replace(/^\[|\]$/g, '');
    if (policy.allowsHost(hostname)) {
      connect(options, callback);
      return;
    }
    if (isIP(hostname)) {
      const rule = policy.refusal(hostname);
      if (rule) callback(new EgressRefusedError(rule, hostname, hostname), null);
      else connect(options, callback);
      return;
    }
    resolveAll(hostname).then(
      (addresses) => {
        if (addresses.length === 0) {
          callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), null);
          return;
        }
        for (const address of addresses) {
          const rule = policy.refusal(address);
          if (rule) {
            callback(new EgressRefusedError(rule, hostname, address), null);
            return;
          }
        }
        const servername = options.servername || hostname;
        const attempt = (index: number) =>
          connect({ ...options, hostname: addresses[index]!, servername }, (...result) => {
            if (result[0] && index + 1 < addresses.length) attempt(index + 1);
            else callback(...result);
          });
        attempt(0);
      },
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), null),
    );
  };
}
