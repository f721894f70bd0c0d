import { InvalidInputError, ScopeError } from './errors.js';
import { isPlainObject } from './validate.js';
import type {
  Collection, DeleteResult, Document, Filter, FindOptions, NewDocument, OrganizationScope, Projection, Store, Update, UpdateOptions, UpdateResult,
} from './types.js';

const SCOPE_FIELD = 'organization_id';
/** Fields a tenant handle can neither read, filter on (a range filter would leak the hash bit by bit) nor write. */
const HIDDEN_FIELDS: Readonly<Record<string, readonly string[]>> = { keys: ['secretHash'] };

const touches = (path: string, field: string) => path === field || path.startsWith(`${field}.`);

function filterPaths(filter: Filter): string[] {
  return Object.entries(filter).flatMap(([key, value]) =>
    key === '$and' || key === '$or' ? (Array.isArray(value) ? value.flatMap((clause) => (isPlainObject(clause) ? filterPaths(clause) : [])) : []) : [key],
  );
}

/** A collection seen by one organization: the scope is added to every filter and every written document. */
class ScopedCollection<T extends Document> implements Collection<T> {
  private readonly hidden: readonly string[];

  constructor(
    private readonly inner: Collection<T>,
    private readonly organizationId: string,
  ) {
    this.hidden = HIDDEN_FIELDS[inner.name] ?? [];
  }

  get name(): string {
    return this.inner.name;
  }

  async findOne(filter: Filter = {}, options: Omit<FindOptions, 'limit'> = {}): Promise<T | null> {
    return this.inner.findOne(this.scope(filter), this.withoutHidden(options));
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    return this.inner.find(this.scope(filter), this.withoutHidden(options));
  }

  async countDocuments(filter: Filter = {}): Promise<number> {
    return this.inner.countDocuments(this.scope(filter));
  }

  async insertOne(document: NewDocument): Promise<{ insertedId: string }> {
    if (!isPlainObject(document)) throw new InvalidInputError('a document must be a plain object');
    for (const field of this.hidden) if (Object.hasOwn(document, field)) throw new ScopeError(`${field} cannot be written through an organization scope`);
    // Its own organization is what the scope writes anyway (a document read back and created again carries it);
    // another one is refused as `$set` of it is, rather than quietly replaced.
    if (Object.hasOwn(document, SCOPE_FIELD) && document[SCOPE_FIELD] !== this.organizationId) {
      throw new InvalidInputError('organization_id cannot be set to another organization through an organization scope');
    }
    return this.inner.insertOne({ ...document, [SCOPE_FIELD]: this.organizationId });
  }

  async updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    this.checkUpsert(filter, options);
    return this.inner.updateOne(this.scope(filter), this.checkUpdate(update), options);
  }

  async updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult> {
    this.checkUpsert(filter, options);
    return this.inner.updateMany(this.scope(filter), this.checkUpdate(update), options);
  }

  async deleteOne(filter: Filter): Promise<DeleteResult> {
    return this.inner.deleteOne(this.scope(filter));
  }

  async deleteMany(filter: Filter): Promise<DeleteResult> {
    return this.inner.deleteMany(this.scope(filter));
  }

  async createIndex(): Promise<string> {
    throw new ScopeError('indexes are created on the store, not through an organization scope');
  }

  /**
   * Adds the organization to the filter. A caller's own `organization_id` condition is kept inside `$and`, so it
   * can only narrow the result (a different organization matches nothing), never widen it.
   */
  private scope(filter: Filter): Filter {
    if (!isPlainObject(filter)) throw new InvalidInputError('a filter must be a plain object');
    // The filter's paths are listed only for a collection with hidden fields (`keys`): for the others there is nothing to look for.
    if (this.hidden.length > 0) {
      const paths = filterPaths(filter);
      for (const field of this.hidden) if (paths.some((path) => touches(path, field))) throw new ScopeError(`${field} cannot be queried through an organization scope`);
    }
    if (Object.hasOwn(filter, SCOPE_FIELD) || Object.hasOwn(filter, '$and')) return { [SCOPE_FIELD]: this.organizationId, $and: [filter] };
    return { ...filter, [SCOPE_FIELD]: this.organizationId };
  }

  /**
   * An upsert builds its new document from the filter's equality conditions, so a caller's `organization_id`
   * there would compete with the scope's own (MongoDB refuses the pair, a naive seed lets the caller win). Both
   * backends refuse it up front.
   */
  private checkUpsert(filter: Filter, options: UpdateOptions | undefined): void {
    if (options?.upsert !== true || !isPlainObject(filter)) return;
    if (filterPaths(filter).some((path) => touches(path, SCOPE_FIELD))) {
      throw new InvalidInputError('organization_id cannot be named in the filter of an upsert through an organization scope');
    }
  }

  private checkUpdate(update: Update): Update {
    if (!isPlainObject(update)) throw new InvalidInputError('an update must be an object of operators');
    for (const fields of Object.values(update)) {
      if (!isPlainObject(fields)) continue;
      for (const path of Object.keys(fields)) {
        if (touches(path, SCOPE_FIELD)) throw new InvalidInputError('organization_id cannot be changed through an organization scope');
        for (const field of this.hidden) if (touches(path, field)) throw new ScopeError(`${field} cannot be written through an organization scope`);
      }
    }
    return update;
  }

  private withoutHidden<O extends { projection?: Projection; sort?: FindOptions['sort'] }>(options: O): O {
    if (this.hidden.length === 0) return options;
    // An order reveals a field as surely as a filter does, one comparison at a time.
    for (const path of Object.keys(options.sort ?? {})) {
      for (const field of this.hidden) if (touches(path, field)) throw new ScopeError(`sort.${path}: ${field} cannot be sorted on through an organization scope`);
    }
    const projection: Projection = { ...(options.projection ?? {}) };
    const including = Object.entries(projection).some(([path, value]) => path !== '_id' && Boolean(value));
    for (const field of this.hidden) {
      for (const path of Object.keys(projection)) if (touches(path, field)) delete projection[path];
      if (!including) projection[field] = 0;
    }
    if (including && !Object.entries(projection).some(([path, value]) => path !== '_id' && Boolean(value))) projection._id = 1;
    return { ...options, projection };
  }
}

/** SPEC 7.2: a tenant's handle on the store; it never takes an organization from the caller. */
export class OrganizationScopeHandle implements OrganizationScope {
  constructor(
    private readonly store: Store,
    readonly organizationId: string,
  ) {
    if (typeof organizationId !== 'string' || organizationId.length === 0) throw new ScopeError('an organization scope needs an organization id');
  }

  collection<T extends Document = Document>(name: string): Collection<T> {
    if (name === 'organizations') throw new ScopeError('organizations are not tenant documents; use the store itself');
    return new ScopedCollection(this.store.collection<T>(name), this.organizationId);
  }
}
