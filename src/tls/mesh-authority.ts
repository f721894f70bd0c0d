import { X509Certificate, randomBytes, webcrypto } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { Store } from '../db/types.js';
import { DuplicateKeyError } from '../db/errors.js';
import type { SecretKeyring } from '../secrets/keyring.js';
import { lazyCheck } from '../schema/lazy-check.js';
import type { MutualTls } from './material.js';

type CryptoKey = webcrypto.CryptoKey;

/** The store's own collection of cluster CAs (names starting `fleetplane_` are never reachable through `/crud`). */
export const MESH_AUTHORITIES = 'fleetplane_mesh_authorities';

const AuthorityRecord = lazyCheck(
  Type.Object({
    _id: Type.String({ minLength: 1 }),
    cert: Type.String({ minLength: 1 }),
    key: Type.String({ minLength: 1 }),
    createdAt: Type.String(),
    revoked: Type.Array(Type.String({ pattern: '^[0-9A-F]+$' })),
  }),
);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const CA_YEARS = 10;
/** Clocks of a cluster drift: a certificate is valid from a little before it was made. */
const SKEW_MS = 5 * 60_000;

type X509 = typeof import('@peculiar/x509');
let library: Promise<X509> | undefined;

/** The X.509 library, loaded on first use (a server whose mesh makes no certificates never holds it). */
function x509(): Promise<X509> {
  library ??= (async () => {
    // The library's dependency injection needs the reflection polyfill loaded first.
    await import('reflect-metadata');
    const loaded = await import('@peculiar/x509');
    loaded.cryptoProvider.set(webcrypto as never);
    return loaded;
  })();
  return library;
}

export interface IssueOptions {
  /** The name the certificate is for: a server id (peers check it against the id a link claims). */
  name: string;
  lifetimeMs: number;
  /** For tests of refusals: a certificate that is already expired. */
  notAfter?: Date;
}

export interface Issued {
  material: MutualTls;
  serial: string;
  validTo: string;
}

/**
 * A cluster's mesh CA (`mesh.tls.mode: "auto"`): its certificate and key live in the store, the key sealed with
 * the keyring, so every server of the cluster (sharing the store and its keys) issues certificates of the same
 * CA. The first server to start makes it; servers starting at the same time all insert one, the store keeps the
 * first and the others use it. The record also lists revoked certificate serials, checked at every handshake.
 */
export class MeshAuthority {
  private revokedSerials = new Set<string>();

  private constructor(
    private readonly deps: { store: Store; secrets: SecretKeyring; cluster: string },
    private readonly ca: { cert: string; key: CryptoKey; name: string },
    revoked: readonly string[],
  ) {
    this.revokedSerials = new Set(revoked);
  }

  static async open(deps: { store: Store; secrets: SecretKeyring; cluster: string }): Promise<MeshAuthority> {
    const collection = deps.store.collection(MESH_AUTHORITIES);
    let record = await collection.findOne({ _id: deps.cluster });
    if (!record) {
      try {
        await collection.insertOne(await newAuthority(deps));
      } catch (error) {
        // Another server of the cluster made it first: its CA is the cluster's.
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
      record = await collection.findOne({ _id: deps.cluster });
    }
    if (!AuthorityRecord.Check(record)) throw new Error(`the mesh CA record of cluster "${deps.cluster}" is not readable`);
    const pem = deps.secrets.open(record.key, placeOf(deps.cluster));
    const key = await webcrypto.subtle.importKey('pkcs8', derOf(pem), ALGORITHM, false, ['sign']);
    return new MeshAuthority(deps, { cert: record.cert, key: key as CryptoKey, name: new X509Certificate(record.cert).subject.replaceAll('\n', ', ') }, record.revoked);
  }

  get certificate(): string {
    return this.ca.cert;
  }

  /** A fresh key and a certificate for it, signed by the cluster's CA. */
  async issue(options: IssueOptions): Promise<Issued> {
    const lib = await x509();
    const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
    const issuer = new lib.X509Certificate(this.ca.cert);
    const now = Date.now();
    const certificate = await lib.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${options.name}`,
      issuer: issuer.subject,
      notBefore: new Date(now - SKEW_MS),
      notAfter: options.notAfter ?? new Date(now + options.lifetimeMs),
      signingAlgorithm: ALGORITHM,
      publicKey: keys.publicKey as never,
      signingKey: this.ca.key as never,
      extensions: [
        new lib.BasicConstraintsExtension(false, undefined, true),
        new lib.KeyUsagesExtension(lib.KeyUsageFlags.digitalSignature, true),
        new lib.ExtendedKeyUsageExtension([lib.ExtendedKeyUsage.serverAuth, lib.ExtendedKeyUsage.clientAuth]),
        await lib.AuthorityKeyIdentifierExtension.create(issuer, false),
      ],
    });
    const cert = certificate.toString('pem');
    const key = lib.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey as CryptoKey), 'PRIVATE KEY');
    const parsed = new X509Certificate(cert);
    return { material: { key, cert, ca: this.ca.cert }, serial: parsed.serialNumber, validTo: new Date(parsed.validTo).toISOString() };
  }

  /** Whether `serial` (upper-case hex, as Node reports it) was revoked, as last read from the store. */
  revoked(serial: string): boolean {
    return this.revokedSerials.has(serial);
  }

  /**
   * Reads the revoked serials again (every server checks its peers against the list in the store); whether the
   * list changed.
   */
  async refresh(): Promise<boolean> {
    const record = await this.deps.store.collection(MESH_AUTHORITIES).findOne({ _id: this.deps.cluster }, { projection: { revoked: 1 } });
    const revoked = (record as { revoked?: unknown } | null)?.revoked;
    if (!Array.isArray(revoked)) return false;
    const next = new Set(revoked.filter((entry): entry is string => typeof entry === 'string'));
    const changed = next.size !== this.revokedSerials.size || [...next].some((entry) => !this.revokedSerials.has(entry));
    this.revokedSerials = next;
    return changed;
  }

  /** Adds `serial` to the cluster's revoked certificates; handshakes presenting it are refused from now on. */
  async revoke(serial: string): Promise<boolean> {
    await this.deps.store.collection(MESH_AUTHORITIES).updateOne({ _id: this.deps.cluster }, { $addToSet: { revoked: serial } });
    return this.refresh();
  }
}

async function newAuthority(deps: { secrets: SecretKeyring; cluster: string }) {
  const lib = await x509();
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const now = Date.now();
  const certificate = await lib.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=Fleetplane mesh CA, O=${deps.cluster.replace(/[,=+<>#;\\"]/g, '_')}`,
    notBefore: new Date(now - SKEW_MS),
    notAfter: new Date(now + CA_YEARS * 365 * 86_400_000),
    signingAlgorithm: ALGORITHM,
    keys: keys as never,
    extensions: [
      new lib.BasicConstraintsExtension(true, 0, true),
      new lib.KeyUsagesExtension(lib.KeyUsageFlags.keyCertSign | lib.KeyUsageFlags.cRLSign, true),
      await lib.SubjectKeyIdentifierExtension.create(keys.publicKey as never),
    ],
  });
  const key = lib.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey as CryptoKey), 'PRIVATE KEY');
  return { _id: deps.cluster, cert: certificate.toString('pem'), key: deps.secrets.seal(key, placeOf(deps.cluster)), createdAt: new Date(now).toISOString(), revoked: [] as string[] };
}

const placeOf = (cluster: string) => ({ organizationId: cluster, collection: MESH_AUTHORITIES, path: ['key'] });

/** 16 random bytes, the first below 0x80: a positive serial, as RFC 5280 asks. */
function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x10;
  return bytes.toString('hex');
}

function derOf(pem: string): ArrayBuffer {
  const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return der.buffer.slice(der.byteOffset, der.byteOffset + der.byteLength) as ArrayBuffer;
}
