import { createKey, revokeKey } from '../auth/keys.js';
import type { Store } from '../db/types.js';
import type { ServerKeys } from './fleet.js';

/**
 * The keys a parent gives the servers it creates: keys of the platform organization that hold `manager` only
 * (SPEC 13.3), never `/crud` or anything else, each bound to its server's cluster in the key itself: the
 * binding outlives the server's record.
 */
export function platformServerKeys(store: Store, platformOrganization: string): ServerKeys {
  return {
    issue: async (serverId, clusterId) => {
      const created = await createKey(store, { organizationId: platformOrganization, name: `managed server ${serverId}`.slice(0, 128), permissions: { manager: true }, clusterId });
      return { key_id: created.key_id, key: created.key };
    },
    revoke: async (keyId) => void (await revokeKey(store, platformOrganization, keyId)),
  };
}
