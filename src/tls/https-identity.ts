import type { Server as TlsServer } from 'node:tls';
import { checkPair, type CertificateFacts, type TlsPair } from './material.js';

const FIELDS = { key: 'https.key', cert: 'https.cert' };

/**
 * The HTTPS certificate of one process and the TLS servers that present it. A new pair is checked, then set on
 * every server at once (`setSecureContext`): connections open before keep their session, the next ones see the
 * new certificate.
 */
export class HttpsIdentity {
  private current: TlsPair | undefined;
  private facts: CertificateFacts | undefined;
  private readonly servers = new Set<TlsServer>();

  /** Without a pair, one is given with `accept` before any server is served (a worker asks its primary). */
  constructor(pair?: TlsPair) {
    if (pair) this.accept(pair);
  }

  get pair(): TlsPair {
    if (!this.current) throw new Error('no HTTPS certificate has been given yet');
    return this.current;
  }

  get certificate(): CertificateFacts | undefined {
    return this.facts;
  }

  /** Presents the current certificate on `server` from now on, and every later one. */
  serve(server: TlsServer): void {
    server.setSecureContext(this.pair);
    this.servers.add(server);
  }

  /** Checks `pair` and swaps it in; a pair that cannot serve throws and changes nothing. */
  accept(pair: TlsPair): CertificateFacts {
    const facts = checkPair(pair, FIELDS);
    for (const server of this.servers) server.setSecureContext(pair);
    this.current = pair;
    this.facts = facts;
    return facts;
  }
}
