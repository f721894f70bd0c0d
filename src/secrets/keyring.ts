import { SecretBox, isSealed, parseSealed } from './box.js';
import { SecretKeyError, SecretUnreadableError } from './errors.js';
import { createKeyFile, keyFileStamp, parseKeyText, readKeyFile } from './key-file.js';

/** The key, when the operator keeps it outside the data directory; it then wins over the key file. */
export const SECRETS_KEY_ENV = 'FLEETPLANE_SECRETS_KEY';
/** The key `FLEETPLANE_SECRETS_KEY` replaces, still accepted for opening while a rotation is under way. */
export const SECRETS_PREVIOUS_KEY_ENV = 'FLEETPLANE_SECRETS_PREVIOUS_KEY';

/** Where a secret is stored. A sealed value is bound to its place: elsewhere it does not open. */
export interface SecretPlace {
  organizationId: string;
  collection: string;
  /** Field path inside the document, e.g. ['headers', 'authorization', 'secret']. */
  path: readonly string[];
}

/** What users of stored secrets need: the plaintext of a stored value (one stored before sealing is returned as is). */
export interface SecretOpener {
  open(value: string, place: SecretPlace): string;
}

export const describePlace = (place: SecretPlace) => `${place.collection}.${place.path.join('.')}`;
const contextOf = (place: SecretPlace) => JSON.stringify([place.organizationId, place.collection, ...place.path]);

/** The key id a sealed value names, or undefined for plaintext or a malformed value. */
export const sealedKeyId = (value: string): string | undefined => (isSealed(value) ? parseSealed(value)?.keyId : undefined);

function keyFromEnv(env: NodeJS.ProcessEnv, name: string): Buffer | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const key = parseKeyText(raw);
  // Never echo the value: a near-miss key is still most of a key.
  if (!key) throw new SecretKeyError(`${name} must be 32 bytes as base64 (44 characters) or hex (64 characters), e.g. the output of "openssl rand -base64 32"`, 'env');
  return key;
}

/**
 * The keys that seal provider and webhook secrets at rest (SPEC 10.1, 12.1). From `FLEETPLANE_SECRETS_KEY`
 * (and `FLEETPLANE_SECRETS_PREVIOUS_KEY`), else from the key file, created with a new random key the first
 * time a secret is sealed. Every process reads the same environment and the same file, so the primary and
 * its workers (and servers sharing the store file) hold the same keys; nothing passes through the config.
 *
 * The file is re-read when it changes: before sealing (a cheap stat; secrets are written rarely) and when a
 * value names a key this process does not hold, so a rotation reaches running servers without a restart.
 */
export class SecretKeyring implements SecretOpener {
  #boxes: SecretBox[];
  #stamp: string | undefined;

  private constructor(
    readonly source: 'env' | 'file' | 'fixed',
    readonly keyFile: string | undefined,
    keys: Buffer[],
  ) {
    this.#boxes = keys.map((key) => new SecretBox(key));
  }

  /** The keyring of a server or command: environment first, else `keyFile`. Checks what exists now. */
  static fromEnvironment(keyFile: string, env: NodeJS.ProcessEnv = process.env): SecretKeyring {
    const key = keyFromEnv(env, SECRETS_KEY_ENV);
    const previous = keyFromEnv(env, SECRETS_PREVIOUS_KEY_ENV);
    if (key) return new SecretKeyring('env', undefined, previous ? [key, previous] : [key]);
    if (previous) throw new SecretKeyError(`${SECRETS_PREVIOUS_KEY_ENV} is set without ${SECRETS_KEY_ENV}: set both (the new key and the one it replaces) or neither`, 'env');
    const keyring = new SecretKeyring('file', keyFile, []);
    // An existing file is checked at once: a bad one stops a boot, not the first request that needs it.
    keyring.refresh(false);
    return keyring;
  }

  /** Fixed keys, the first one sealing: what a rotation works with. */
  static fromKeys(keys: Buffer[]): SecretKeyring {
    if (keys.length === 0) throw new RangeError('a keyring needs at least one key');
    return new SecretKeyring('fixed', undefined, keys);
  }

  /** Where the keys come from, for messages. */
  describeSource(): string {
    if (this.source === 'env') return `${SECRETS_KEY_ENV} (or ${SECRETS_PREVIOUS_KEY_ENV})`;
    return this.source === 'file' ? this.keyFile! : 'this keyring';
  }

  /** Ids of the keys that open values, the sealing one first; none while there is no key file yet. */
  keyIds(): string[] {
    if (this.source === 'file') this.refresh(false);
    return this.#boxes.map((box) => box.keyId);
  }

  /** The id new values are sealed with (creates the key file when there is none). */
  sealingKeyId(): string {
    return this.sealingBox().keyId;
  }

  seal(plaintext: string, place: SecretPlace): string {
    return this.sealingBox().seal(plaintext, contextOf(place));
  }

  /** Plaintext stored before sealing existed is returned as it is; a sealed value opens here or throws. */
  open(value: string, place: SecretPlace): string {
    if (!isSealed(value)) return value;
    const sealed = parseSealed(value);
    if (!sealed) throw new SecretUnreadableError(`${describePlace(place)} is not a valid sealed value`, 'malformed');
    let box = this.#boxes.find((candidate) => candidate.keyId === sealed.keyId);
    if (!box && this.source === 'file') {
      this.refresh(false);
      box = this.#boxes.find((candidate) => candidate.keyId === sealed.keyId);
    }
    if (!box) throw new SecretUnreadableError(`${describePlace(place)} is sealed with key ${sealed.keyId}, which ${this.describeSource()} does not hold`, 'unknown_key');
    const plaintext = box.open(sealed, contextOf(place));
    if (plaintext === undefined) {
      throw new SecretUnreadableError(`${describePlace(place)} does not open with key ${sealed.keyId}: it was altered, or sealed for another organization or field`, 'rejected');
    }
    return plaintext;
  }

  /**
   * What a write stores: plaintext is sealed; a sealed value is kept as it is (never sealed twice) if it opens at
   * this place, so a value copied from another organization or field is refused, not stored.
   */
  admit(value: string, place: SecretPlace): string {
    if (!isSealed(value)) return this.seal(value, place);
    this.open(value, place);
    return value;
  }

  private sealingBox(): SecretBox {
    if (this.source === 'file') this.refresh(true);
    return this.#boxes[0]!;
  }

  /** Re-reads the key file if it changed; `create` makes it when there is none. */
  private refresh(create: boolean): void {
    const file = this.keyFile!;
    const stamp = keyFileStamp(file);
    if (stamp !== undefined && stamp === this.#stamp) return;
    if (stamp === undefined && this.#boxes.length > 0) {
      // Keep opening with the keys in hand; sealing with a new key would strand everything sealed so far.
      if (create) throw new SecretKeyError(`${file} was removed while this process used it; restore it from a backup`, 'file');
      return;
    }
    const content = stamp === undefined ? (create ? createKeyFile(file) : undefined) : (readKeyFile(file) ?? (create ? createKeyFile(file) : undefined));
    if (!content) return;
    this.#boxes = content.keys.map((key) => new SecretBox(key));
    this.#stamp = content.stamp;
  }
}
