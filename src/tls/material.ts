import { readFileSync } from 'node:fs';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { FleetplaneError } from '../errors.js';

/** A private key and its certificate chain, as PEM text (what travels to workers over IPC). */
export interface TlsPair {
  key: string;
  cert: string;
}

/** A pair with the CA its peers are checked against: the mesh's mutual-TLS material. */
export interface MutualTls extends TlsPair {
  ca: string;
}

/** What identifies a certificate in logs and replies. */
export interface CertificateFacts {
  serial: string;
  fingerprint256: string;
  subject: string;
  validTo: string;
}

/** TLS material that cannot be used: a file that cannot be read, does not parse, or a key that is not the certificate's. */
export class TlsMaterialError extends FleetplaneError {
  override readonly name = 'TlsMaterialError';
  constructor(message: string) {
    super('tls_invalid', message, 400);
  }
}

/** The certificate's facts (the first certificate of a chain: the server's own). */
export function certificateFacts(cert: string | Buffer, field = 'certificate'): CertificateFacts {
  let parsed: X509Certificate;
  try {
    parsed = new X509Certificate(cert);
  } catch {
    throw new TlsMaterialError(`${field} does not parse as a PEM certificate`);
  }
  return { serial: parsed.serialNumber, fingerprint256: parsed.fingerprint256, subject: parsed.subject, validTo: new Date(parsed.validTo).toISOString() };
}

/**
 * Checks that `pair` can serve: the certificate and the key parse, the key is the certificate's, and Node
 * builds a TLS context of them (and of `ca`, when given). Throws a `TlsMaterialError` naming the field.
 */
export function checkPair(pair: TlsPair & { ca?: string }, fields: { key: string; cert: string; ca?: string }): CertificateFacts {
  const facts = certificateFacts(pair.cert, fields.cert);
  let key;
  try {
    key = createPrivateKey(pair.key);
  } catch {
    throw new TlsMaterialError(`${fields.key} does not parse as a PEM private key`);
  }
  if (!new X509Certificate(pair.cert).checkPrivateKey(key)) throw new TlsMaterialError(`${fields.key} is not the key of ${fields.cert}`);
  if (pair.ca !== undefined) certificateFacts(pair.ca, fields.ca);
  try {
    createSecureContext({ key: pair.key, cert: pair.cert, ...(pair.ca === undefined ? {} : { ca: pair.ca }) });
  } catch (error) {
    throw new TlsMaterialError(`${fields.cert}: ${(error as Error).message}`);
  }
  return facts;
}

/** Reads a PEM file; the error names the field and what went wrong (never the content). */
export function readPem(path: string, field: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new TlsMaterialError(`cannot read ${field} (${(error as NodeJS.ErrnoException).code ?? 'error'}: ${path})`);
  }
}
