import type {
  ChangeListener, Collection, DeleteResult, Document, Filter, FindOptions, IndexOptions, NewDocument, OrganizationScope, Store, Update, UpdateOptions, UpdateResult,
} from '../db/types.js';
import { isPlainObject } from '../db/validate.js';
import { SecretUnreadableError, SecretWriteError } from './errors.js';
import { SECRET_COLLECTIONS, filterNamesSecrets, transformDocument, transformUpdate, type SecretTransform } from './fields.js';
import type { SecretPlace } from './keyring.js';

/** What the store needs from the keyring: the stored form of a secret about to be written. */
export interface SecretSealer {
  admit(value: string, place: SecretPlace): string;
}

/** Writes to `apis` and `webhooks` with their secrets sealed; everything else passes through unchanged. */
class SealingCollection<T extends Document> implements Collection<T> {
  constructor(
    private readonly inner: Collection<T>,
    private readonly sealer: SecretSealer,
    /** The scope's organization; unscoped handles take it from the document or the filter. */
    private readonly organizationId: string | undefined,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  findOne(filter?: Filter, options?: Omit<FindOptions, 'limit'>): Promise<T | null> {
    return this.inner.findOne(filter, options);
  }

  find(filter?: Filter, options?: FindOptions): Promise<T[]> {
    return this.inner.find(filter, options);
  }

  countDocuments(filter?: Filter): Promise<number> {
    return this.inner.countDocuments(filter);
  }

  async insertOne(document: NewDocument): Promise<{ insertedId: string }> {
    if (!isPlainObject(document)) return this.inner.insertOne(document);
    return this.inner.insertOne(transformDocument(this.name, document, this.admit(this.organizationId ?? document.organization_id)));
  }

  async updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    return this.inner.updateOne(filter, this.sealUpdate(filter, update, options), options);
  }

  async updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    return this.inner.updateMany(filter, this.sealUpdate(filter, update, options), options);
  }

  deleteOne(filter: Filter): Promise<DeleteResult> {
    return this.inner.deleteOne(filter);
  }

  deleteMany(filter: Filter): Promise<DeleteResult> {
    return this.inner.deleteMany(filter);
  }

  createIndex(fields: Record<string, 1>, options: IndexOptions): Promise<string> {
    return this.inner.createIndex(fields, options);
  }

  private sealUpdate(filter: Filter, update: Update, options: UpdateOptions | undefined): Update {
    if (!isPlainObject(update)) return update;
    if (options?.upsert && isPlainObject(filter) && filterNamesSecrets(this.name, filter)) {
      throw new SecretWriteError(`an upsert of ${this.name} cannot take secret fields from its filter`);
    }
    const named = isPlainObject(filter) && typeof filter.organization_id === 'string' ? filter.organization_id : undefined;
    return transformUpdate(this.name, update, this.admit(this.organizationId ?? named));
  }

  private admit(organizationId: unknown): SecretTransform {
    return (value, path) => {
      if (typeof organizationId !== 'string' || organizationId === '') {
        throw new SecretWriteError(`${this.name} secrets are sealed for one organization: write them through forOrganization(id) or name organization_id`);
      }
      try {
        return this.sealer.admit(value, { organizationId, collection: this.name, path });
      } catch (error) {
        if (!(error instanceof SecretUnreadableError)) throw error;
        throw new SecretWriteError(`${path.join('.')}: this sealed value (fpsec:...) does not belong to this field of this organization; send the secret itself`, 'invalid_secret');
      }
    };
  }
}

/**
 * The store with provider and webhook secrets sealed on every write (SPEC 10.1, 12.1): CRUD, `apply` and code
 * writing through `server.db` alike. Reads return what is stored (sealed values); the code that uses a secret
 * opens it (`revealSecrets`), and replies redact it.
 */
export class SealedStore implements Store {
  constructor(
    private readonly inner: Store,
    private readonly sealer: SecretSealer,
  ) {}

  get decorated(): Store {
    return this.inner;
  }

  get backend(): Store['backend'] {
    return this.inner.backend;
  }

  collection<T extends Document = Document>(name: string): Collection<T> {
    const collection = this.inner.collection<T>(name);
    return SECRET_COLLECTIONS.has(name) ? new SealingCollection(collection, this.sealer, undefined) : collection;
  }

  forOrganization(organizationId: string): OrganizationScope {
    const scope = this.inner.forOrganization(organizationId);
    const sealer = this.sealer;
    return {
      organizationId: scope.organizationId,
      collection<T extends Document = Document>(name: string): Collection<T> {
        const collection = scope.collection<T>(name);
        return SECRET_COLLECTIONS.has(name) ? new SealingCollection(collection, sealer, scope.organizationId) : collection;
      },
    };
  }

  changeToken(collections: readonly string[]): Promise<string> {
    return this.inner.changeToken(collections);
  }

  onChange(listener: ChangeListener): () => void {
    return this.inner.onChange(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
