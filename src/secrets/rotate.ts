import { randomBytes } from 'node:crypto';
import type { Store } from '../db/types.js';
import { KEY_BYTES, keyIdOf } from './box.js';
import { readKeyFile, replaceKeyFile } from './key-file.js';
import { SECRETS_KEY_ENV, SECRETS_PREVIOUS_KEY_ENV, SecretKeyring, sealedKeyId } from './keyring.js';
import { resealSecrets, secretCensus, type SecretLocation, type SweepResult } from './sweep.js';

export interface RotationResult {
  /** Every readable secret is now sealed with this key. */
  keyId: string;
  /** Keys nothing is sealed with any more (file: removed from the key file). */
  retiredKeyIds: string[];
  /** Secrets sealed again, and of those the ones that were stored in plain text. */
  resealed: number;
  plaintext: number;
  /** Secrets no key opens (altered in the store), left as they are. */
  unreadable: SecretLocation[];
  keySource: 'file' | 'env';
  keyFile?: string;
}

/** The rotation could not start; nothing was changed. */
export class RotationRefusedError extends Error {
  override readonly name = 'RotationRefusedError';
}

/** A sweep writes nothing once no process seals with an old key; a few passes cover writes that raced one. */
const MAX_PASSES = 4;

async function resealUntilSettled(store: Store, keyring: SecretKeyring): Promise<SweepResult> {
  const keyId = keyring.sealingKeyId();
  const total: SweepResult = { resealed: 0, plaintext: 0, unreadable: [] };
  for (let pass = 0; pass < MAX_PASSES; pass += 1) {
    const result = await resealSecrets(store, keyring, (value) => sealedKeyId(value) !== keyId);
    total.resealed += result.resealed;
    total.plaintext += result.plaintext;
    // Unreadable values are found again by every pass; the last pass's list is the one that stands.
    total.unreadable = result.unreadable;
    if (result.resealed === 0) break;
  }
  return total;
}

/** Refuses when some secret is sealed with a key the keyring lacks: rotating would leave it behind for good. */
async function assertEveryKeyHeld(store: Store, held: readonly string[], where: string): Promise<void> {
  const census = await secretCensus(store);
  const missing = [...census.byKey].filter(([keyId]) => keyId !== '' && !held.includes(keyId));
  if (missing.length === 0) return;
  const count = missing.reduce((sum, [, n]) => sum + n, 0);
  throw new RotationRefusedError(
    `${count} stored secret${count === 1 ? ' is' : 's are'} sealed with key ${missing.map(([keyId]) => keyId).join(', ')}, which ${where} does not hold; nothing was changed (restore that key first)`,
  );
}

/**
 * `fleetplane keys rotate-secrets`: every provider and webhook secret of every organization sealed with a new
 * key, plaintext from earlier versions included. With the key file, in an order that never leaves a stored
 * secret without a key that opens it, even for servers running meanwhile (they re-read the file when it
 * changes):
 *   1. the file becomes [new, old...]: every process can open both, and seals with the new key from now on;
 *   2. every secret not sealed with the new key is sealed again, pass after pass until a pass finds none;
 *   3. the file becomes [new]; a last pass seals again anything a server wrote with the old key in between
 *      (this process still holds the old key).
 * With `FLEETPLANE_SECRETS_KEY` the keys are the operator's: no key is made; every secret is sealed with
 * `FLEETPLANE_SECRETS_KEY`, opening with it or `FLEETPLANE_SECRETS_PREVIOUS_KEY`.
 */
export async function rotateSecrets(store: Store, options: { keyFile: string; env?: NodeJS.ProcessEnv }): Promise<RotationResult> {
  const environment = SecretKeyring.fromEnvironment(options.keyFile, options.env);
  if (environment.source === 'env') {
    const held = environment.keyIds();
    await assertEveryKeyHeld(store, held, `${SECRETS_KEY_ENV} or ${SECRETS_PREVIOUS_KEY_ENV}`);
    const result = await resealUntilSettled(store, environment);
    return { keyId: held[0]!, retiredKeyIds: held.slice(1), ...result, keySource: 'env' };
  }
  const current = readKeyFile(options.keyFile)?.keys ?? [];
  const currentIds = current.map(keyIdOf);
  await assertEveryKeyHeld(store, currentIds, options.keyFile);
  const next = randomBytes(KEY_BYTES);
  const keyring = SecretKeyring.fromKeys([next, ...current]);
  replaceKeyFile(options.keyFile, [next, ...current]);
  const settled = await resealUntilSettled(store, keyring);
  replaceKeyFile(options.keyFile, [next]);
  const late = await resealSecrets(store, keyring, (value) => sealedKeyId(value) !== keyring.sealingKeyId());
  return {
    keyId: keyring.sealingKeyId(),
    retiredKeyIds: currentIds,
    resealed: settled.resealed + late.resealed,
    plaintext: settled.plaintext + late.plaintext,
    unreadable: late.unreadable,
    keySource: 'file',
    keyFile: options.keyFile,
  };
}
