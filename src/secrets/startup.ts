import type { Store } from '../db/types.js';
import { isSealed } from './box.js';
import type { SecretKeyring } from './keyring.js';
import { resealSecrets, secretCensus } from './sweep.js';

export interface StartupLog {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
}

/**
 * At the primary's start: secrets stored in plain text by a version before sealing are sealed now, so an
 * upgrade needs no step of its own; secrets sealed with a key this server lacks are reported (their provider
 * or webhook fails until that key is back). A failure is logged, never a reason not to start: the secrets
 * stay usable as they are, and `fleetplane keys rotate-secrets` does the same work.
 */
export async function sealPlaintextAtStart(store: Store, keyring: SecretKeyring, log: StartupLog): Promise<void> {
  try {
    const census = await secretCensus(store);
    if (census.plaintext > 0) {
      const result = await resealSecrets(store, keyring, (value) => !isSealed(value));
      log.info({ sealed: result.resealed, keyId: keyring.sealingKeyId() }, 'sealed provider and webhook secrets stored in plain text by an earlier version');
    }
    const held = new Set(keyring.keyIds());
    const missing = [...census.byKey].filter(([keyId]) => !held.has(keyId));
    if (missing.length > 0) {
      log.warn(
        { keys: Object.fromEntries(missing), keySource: keyring.describeSource() },
        'some stored secrets are sealed with a key this server does not hold: their providers and webhooks fail until the key is restored',
      );
    }
  } catch (error) {
    log.error({ reason: (error as Error).message }, 'sealing stored secrets failed; run "fleetplane keys rotate-secrets"');
  }
}
