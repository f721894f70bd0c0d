import { createKey, revokeKey } from '../auth/keys.js';
import type { Store } from '../db/types.js';
import { issuedKeys } from '../inventory/servers.js';
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

/**
 * Keys issued before keys carried their cluster: each takes the cluster of the server record naming it, so its
 * binding no longer depends on that record. The primary of a parent runs it at start; a key already bound is
 * left as it is. Answers how many keys were bound.
 */
export async function bindIssuedKeys(store: Store, platformOrganization: string): Promise<number> {
  const scope = store.forOrganization(platformOrganization);
  let bound = 0;
  for (const { keyId, clusterId } of await issuedKeys(scope)) {
    if (typeof keyId !== 'string' || typeof clusterId !== 'string') continue;
    const result = await scope.collection('keys').updateOne({ _id: keyId, cluster_id: { $exists: false } }, { $set: { cluster_id: clusterId } });
    bound += result.modifiedCount;
  }
  return bound;
}
