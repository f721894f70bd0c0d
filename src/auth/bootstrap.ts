import type { Store } from '../db/types.js';
import { TenancyError } from './errors.js';
import { createKey, type CreatedKey } from './keys.js';
import { createOrganization, type CreateOrganizationInput } from './organizations.js';

/** The store already has an organization; `init` does not run twice. */
export class AlreadyInitializedError extends TenancyError {}

export async function isInitialized(store: Store): Promise<boolean> {
  return (await store.collection('organizations').countDocuments()) > 0;
}

/**
 * `fleetplane init` and the first `start`: the first organization and its admin key (`options.id`: see
 * `createOrganization`). Two processes racing here
 * collide on the unique host index; the loser reports an initialized store rather than a second organization.
 */
export async function initializeStore(store: Store, input: CreateOrganizationInput, options: { id?: string } = {}): Promise<CreatedKey> {
  if (await isInitialized(store)) throw new AlreadyInitializedError('the store is already initialized');
  let organizationId: string;
  try {
    organizationId = (await createOrganization(store, input, options))._id;
  } catch (error) {
    if (error instanceof TenancyError && (await isInitialized(store))) throw new AlreadyInitializedError('the store is already initialized');
    throw error;
  }
  try {
    return await createKey(store, { organizationId, name: 'admin', admin: true });
  } catch (error) {
    await store.collection('organizations').deleteOne({ _id: organizationId });
    throw error;
  }
}
