import type { ResolvedConfig } from '../config/schema.js';
import type { Logger } from '../logging/logger.js';
import type { Store } from '../db/types.js';
import type { Authorizer } from '../auth/authorize.js';
import { openDataServices } from '../auth/services.js';
import { secretsKeyFile } from '../secrets/key-file.js';
import { SecretKeyring } from '../secrets/keyring.js';
import { SealedStore } from '../secrets/sealed-store.js';
import { sealPlaintextAtStart } from '../secrets/startup.js';

export interface ServerData {
  /** The store, with provider and webhook secrets sealed at rest. */
  db: Store;
  authorize: Authorizer;
  secrets: SecretKeyring;
}

/** The keys that seal secrets: a bad FLEETPLANE_SECRETS_KEY or key file stops the start with its reason. */
export function openKeyring(config: ResolvedConfig, env: NodeJS.ProcessEnv): SecretKeyring {
  return SecretKeyring.fromEnvironment(secretsKeyFile(config), env);
}

/**
 * This process's store and the authorizer over it. The primary seals secrets still stored in plain text
 * first; workers open the same store with the same keys.
 */
export async function openServerData(config: ResolvedConfig, log: Logger, secrets: SecretKeyring, options: { sealAtStart: boolean }): Promise<ServerData> {
  const data = await openDataServices(config, log.child({ component: 'authorize' }));
  if (options.sealAtStart) await sealPlaintextAtStart(data.db, secrets, log.child({ component: 'secrets' }));
  return { db: new SealedStore(data.db, secrets), authorize: data.authorize, secrets };
}
