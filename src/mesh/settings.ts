import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { ResolvedConfig } from '../config/schema.js';
import { ConfigError } from '../config/errors.js';
import type { ReconnectSchedule } from './backoff.js';

/**
 * A check of the certificate a peer presented, beyond the CA's signature and the validity dates TLS checks
 * itself (`mesh.tls.mode: "auto"`: it names the server the link claims, and is not revoked). The reason it fails,
 * or undefined.
 */
export type PeerCertificateCheck = (certificate: { serialNumber?: string; subject?: { CN?: string | string[] } } | undefined, peer: string) => string | undefined;

/** The certificate the other end of `socket` presented, when it is a TLS socket that has one. */
export function peerCertificateOf(socket: unknown): { serialNumber?: string; subject?: { CN?: string | string[] } } | undefined {
  const tls = socket as { getPeerCertificate?: () => { serialNumber?: string } };
  const certificate = typeof tls?.getPeerCertificate === 'function' ? tls.getPeerCertificate() : undefined;
  return certificate && certificate.serialNumber ? certificate : undefined;
}

/** The mesh's mutual-TLS material: this server's key and certificate, and the CA its peers are checked against. */
export interface MeshTls {
  key: string | Buffer;
  cert: string | Buffer;
  ca: string | Buffer;
}

export interface MeshSettings {
  /** False when this server stays out of the mesh; `why` says so in the log. */
  active: boolean;
  why?: string;
  secret?: string;
  tls?: MeshTls;
  /** `mesh.tls.mode: "auto"`: the material comes from the cluster's CA (set by the boot code before listening). */
  auto: boolean;
  schedule: ReconnectSchedule;
  /** Transport cap: frames above `maxFrameBytes` and up to this are refused politely, larger ones close the link. */
  maxPayload: number;
}

const WILDCARD = new Set(['', '0.0.0.0', '::', '[::]']);

/** Cross-field checks the schema cannot express, and the TLS files read once. */
export function meshSettings(config: ResolvedConfig): MeshSettings {
  const mesh = config.mesh;
  const { key, cert, ca } = mesh.tls;
  const given = [key, cert, ca].filter(Boolean).length;
  const auto = mesh.tls.mode === 'auto';
  if (auto && given > 0) throw new ConfigError(!key ? (!cert ? 'mesh.tls.ca' : 'mesh.tls.cert') : 'mesh.tls.key', 'mesh.tls.mode "auto" makes its own certificates: remove key, cert and ca (or set mode "files")');
  if (given > 0 && given < 3) throw new ConfigError(!key ? 'mesh.tls.key' : !cert ? 'mesh.tls.cert' : 'mesh.tls.ca', 'mutual TLS needs key, cert and ca');
  if (mesh.reconnect.jitterMinMs > mesh.reconnect.jitterMaxMs) throw new ConfigError('mesh.reconnect.jitterMinMs', 'must not exceed mesh.reconnect.jitterMaxMs');
  if (mesh.pingIntervalMs === 0) throw new ConfigError('mesh.pingIntervalMs', 'must be > 0');
  if (mesh.pongTimeoutMs === 0) throw new ConfigError('mesh.pongTimeoutMs', 'must be > 0');
  let tls: MeshSettings['tls'];
  if (key && cert && ca) {
    try {
      tls = { key: readFileSync(key), cert: readFileSync(cert), ca: readFileSync(ca) };
    } catch (error) {
      throw new ConfigError('mesh.tls', `cannot read a TLS file (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  const why = !mesh.enabled ? 'mesh.enabled is false' : !mesh.secret && !tls && !auto ? 'no mesh.secret (or mesh.tls) configured' : undefined;
  return { active: why === undefined, why, secret: mesh.secret, tls, auto, schedule: mesh.reconnect, maxPayload: mesh.maxFrameBytes * 2 };
}

/** The host name peers use for an address this server binds; every interface means "this host's name". */
function advertisedHost(bind: string): string {
  if (WILDCARD.has(bind)) return hostname();
  return bind.includes(':') && !bind.startsWith('[') ? `[${bind}]` : bind;
}

/** Where load balancers and peers' fallbacks reach this server's HTTP(S) surface. */
export function publicUrl(config: ResolvedConfig, ports: { http?: number; https?: number }): string | undefined {
  if (config.server.publicUrl) return config.server.publicUrl.replace(/\/+$/, '');
  const host = advertisedHost(config.http.host);
  if (ports.https) return `https://${host}:${ports.https}`;
  return ports.http === undefined ? undefined : `http://${host}:${ports.http}`;
}

/**
 * SPEC 6.3, the close contract: 1000 ("do not retry") only for an explicit node shutdown; a restart, a reboot
 * and a signal, which may as well be a service manager restarting the node, close with 1012 so peers retry.
 */
export function meshCloseCode(reason: string): 1000 | 1012 {
  return reason === 'shutdown' ? 1000 : 1012;
}

/** The URL peers dial for this server's mesh port. */
export function meshUrl(config: ResolvedConfig, port: number, tls: boolean): string {
  return config.mesh.url ?? `${tls ? 'wss' : 'ws'}://${advertisedHost(config.mesh.host)}:${port}`;
}
