import type { ResolvedConfig } from '../config/schema.js';
import type { Logger } from '../logging/logger.js';
import type { Store } from '../db/types.js';
import type { Authorizer } from '../auth/authorize.js';
import { openDataServices } from '../auth/services.js';
import type { FailureLedger } from '../auth/failure-limit.js';
import { secretsKeyFile } from '../secrets/key-file.js';
import { SecretKeyring } from '../secrets/keyring.js';
import { SealedStore } from '../secrets/sealed-store.js';
import { sealPlaintextAtStart } from '../secrets/startup.js';
import { untilStopSignal } from '../runtime/starting-signals.js';

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
/**
 * `failureLedger`: where failed authentications are counted, for a worker its primary (see `Authorizer`).
 * `stop`: ends the wait for a store that is still unreachable (the primary's starting signals); without it,
 * SIGTERM or SIGINT during that wait end it.
 */
export async function openServerData(config: ResolvedConfig, log: Logger, secrets: SecretKeyring, options: { sealAtStart: boolean; failureLedger?: FailureLedger; stop?: AbortSignal }): Promise<ServerData> {
  const open = (signal: AbortSignal) => openDataServices(config, log.child({ component: 'authorize' }), { signal, failureLedger: options.failureLedger });
  const data = options.stop ? await open(options.stop) : await untilStopSignal(open, 'stopped while waiting for the store');
  if (options.sealAtStart) await sealPlaintextAtStart(data.db, secrets, log.child({ component: 'secrets' }));
  return { db: new SealedStore(data.db, secrets), authorize: data.authorize, secrets };
}
