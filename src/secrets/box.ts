import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

export const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = 'v1';
/** Every sealed value starts with this; plain text that does is taken for a sealed value. */
export const SEALED_PREFIX = 'fpsec:';
const KEY_ID = /^[A-Za-z0-9_-]{12}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** A sealed value taken apart: `fpsec:v1:<key id>:<iv>:<tag>:<ciphertext>`, the last three base64url. */
export interface SealedValue {
  keyId: string;
  iv: Buffer;
  tag: Buffer;
  data: Buffer;
}

export const isSealed = (value: unknown): value is string => typeof value === 'string' && value.startsWith(SEALED_PREFIX);

/** The parts of a sealed value, or undefined when the text is not one (of this version). */
export function parseSealed(text: string): SealedValue | undefined {
  const parts = text.split(':');
  if (parts.length !== 6 || `${parts[0]}:` !== SEALED_PREFIX || parts[1] !== VERSION) return undefined;
  const [, , keyId, iv, tag, data] = parts as [string, string, string, string, string, string];
  if (!KEY_ID.test(keyId) || ![iv, tag, data].every((part) => BASE64URL.test(part))) return undefined;
  const value = { keyId, iv: Buffer.from(iv, 'base64url'), tag: Buffer.from(tag, 'base64url'), data: Buffer.from(data, 'base64url') };
  return value.iv.length === IV_BYTES && value.tag.length === TAG_BYTES ? value : undefined;
}

/**
 * A key's public name, carried by every value it seals: derived from the key, so it needs no storage of its
 * own and two files holding the same key agree on it. 72 bits of a hash say nothing about the key.
 */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update('fleetplane secrets key id\0').update(key).digest('base64url').slice(0, 12);
}

/**
 * AES-256-GCM with one key: a random 12-byte IV per value and a 16-byte tag. `context` (where the value is
 * stored) is authenticated with the version and the key id, so a value only opens where it was sealed.
 * The key sits in a private field: logging or inspecting a box never shows it.
 */
export class SecretBox {
  readonly keyId: string;
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== KEY_BYTES) throw new RangeError(`a secrets key is ${KEY_BYTES} bytes, not ${key.length}`);
    this.#key = Buffer.from(key);
    this.keyId = keyIdOf(key);
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(this.aad(context));
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [SEALED_PREFIX + VERSION, this.keyId, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join(':');
  }

  /** The plaintext, or undefined when the value was altered or sealed for another context (or key). */
  open(value: SealedValue, context: string): string | undefined {
    if (value.keyId !== this.keyId) return undefined;
    const decipher = createDecipheriv('aes-256-gcm', this.#key, value.iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(this.aad(context));
    decipher.setAuthTag(value.tag);
    try {
      return Buffer.concat([decipher.update(value.data), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }

  private aad(context: string): Buffer {
    return Buffer.from(`${SEALED_PREFIX}${VERSION}:${this.keyId}\n${context}`, 'utf8');
  }
}
