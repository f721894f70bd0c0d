import type { Store } from '../db/types.js';
import type { SecretKeyring } from '../secrets/keyring.js';
import type { PeerCertificateCheck } from '../mesh/settings.js';
import type { MutualTls } from './material.js';
import { MeshAuthority, type Issued } from './mesh-authority.js';
import { SafeEmitter } from '../events/safe-emitter.js';

export interface MeshCertificatesDeps {
  store: Store;
  secrets: SecretKeyring;
  cluster: string;
  serverId: string;
  /** `mesh.tls.lifetimeMs`. */
  lifetimeMs: number;
  log: { info(details: object, message: string): void; warn(details: object, message: string): void; error(details: object, message: string): void };
  /** How often the revoked serials are read again (default 5 s). */
  refreshMs?: number;
}

const SERIAL = /^[0-9A-Fa-f]{1,64}$/;

/** What the certificates tell the mesh. */
export interface MeshCertificateEvents {
  /** A renewed certificate for new links (links already open keep theirs). */
  renewed: [material: MutualTls];
  /** The cluster's revoked serials changed: open links are to be checked again. */
  revocations: [];
}

/**
 * This server's mesh certificate in `mesh.tls.mode: "auto"`: issued by the cluster's CA at start, renewed when a
 * third of its lifetime is left (a renewal that fails is tried again within a minute, long before the
 * certificate expires), and the check of every peer's certificate: it names the server the link claims, and its
 * serial is not on the cluster's revoked list. Renewals and revocations are events (`MeshCertificateEvents`).
 */
export class MeshCertificates extends SafeEmitter<MeshCertificateEvents> {
  private current: Issued;
  private renewTimer: NodeJS.Timeout | undefined;
  private readonly refreshTimer: NodeJS.Timeout;
  private closed = false;
  private renewing = false;

  private constructor(
    private readonly deps: MeshCertificatesDeps,
    private readonly authority: MeshAuthority,
    first: Issued,
  ) {
    super((event, error) => deps.log.error({ err: error, event }, 'mesh certificate listener failed'));
    this.current = first;
    this.schedule(this.renewalDelayMs());
    this.refreshTimer = setInterval(
      () =>
        void authority
          .refresh()
          .then((changed) => this.revocationsRead(changed))
          .catch((error: Error) => deps.log.warn({ reason: error.message }, 'revoked mesh certificates not read')),
      deps.refreshMs ?? 5_000,
    );
    this.refreshTimer.unref();
  }

  static async start(deps: MeshCertificatesDeps): Promise<MeshCertificates> {
    const authority = await MeshAuthority.open(deps);
    const first = await authority.issue({ name: deps.serverId, lifetimeMs: deps.lifetimeMs });
    deps.log.info({ serial: first.serial, validTo: first.validTo }, 'mesh certificate issued by the cluster CA');
    return new MeshCertificates(deps, authority, first);
  }

  get material(): MutualTls {
    return this.current.material;
  }

  get serial(): string {
    return this.current.serial;
  }

  readonly peerCheck: PeerCertificateCheck = (certificate, peer) => {
    if (!certificate?.serialNumber) return 'no client certificate';
    const name = Array.isArray(certificate.subject?.CN) ? certificate.subject.CN[0] : certificate.subject?.CN;
    if (name !== peer) return `the certificate is for "${name ?? 'nobody'}", not "${peer}"`;
    if (this.authority.revoked(certificate.serialNumber)) return `certificate ${certificate.serialNumber} is revoked`;
    return undefined;
  };

  /** `tls.revoke`: adds a serial to the cluster's revoked certificates. */
  async revoke(serial: unknown): Promise<{ revoked: string }> {
    if (typeof serial !== 'string' || !SERIAL.test(serial)) throw new TypeError('give the serial of a mesh certificate (hex), e.g. fleetplane ctl tls revoke 5A0D19B0');
    const normalized = serial.toUpperCase();
    this.revocationsRead(await this.authority.revoke(normalized));
    return { revoked: normalized };
  }

  /**
   * After the revoked serials were read: when they changed, the mesh checks its open links again, and when this
   * server's own certificate is among them it is renewed now (the links its peers close are dialed again with it).
   */
  private revocationsRead(changed: boolean): void {
    if (!changed || this.closed) return;
    this.emitSafe('revocations');
    if (!this.authority.revoked(this.current.serial) || this.renewing) return;
    this.deps.log.warn({ serial: this.current.serial }, "this server's mesh certificate was revoked: renewing it now");
    if (this.renewTimer) clearTimeout(this.renewTimer);
    void this.renew();
  }

  close(): void {
    this.closed = true;
    if (this.renewTimer) clearTimeout(this.renewTimer);
    clearInterval(this.refreshTimer);
  }

  private renewalDelayMs(): number {
    return Math.max(1_000, Date.parse(this.current.validTo) - Date.now() - this.deps.lifetimeMs / 3);
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    this.renewTimer = setTimeout(() => void this.renew(), delayMs);
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    this.renewing = true;
    try {
      const next = await this.authority.issue({ name: this.deps.serverId, lifetimeMs: this.deps.lifetimeMs });
      if (this.closed) return;
      this.current = next;
      this.emitSafe('renewed', next.material);
      this.deps.log.info({ serial: next.serial, validTo: next.validTo }, 'mesh certificate renewed');
      this.schedule(this.renewalDelayMs());
    } catch (error) {
      this.deps.log.warn({ reason: (error as Error).message }, 'mesh certificate not renewed: trying again');
      this.schedule(Math.min(60_000, Math.max(1_000, (Date.parse(this.current.validTo) - Date.now()) / 4)));
    } finally {
      this.renewing = false;
    }
  }
}
