/** A stored document: JSON only, with a string `_id` the store assigns when the caller gives none. */
export type Document = { _id: string } & Record<string, unknown>;
/** What `insertOne` takes: `_id` optional. */
export type NewDocument = Record<string, unknown> & { _id?: string };

/** A MongoDB-style filter limited to the operators in `FILTER_OPERATORS` (see validate.ts). */
export type Filter = Record<string, unknown>;
/** A MongoDB-style update limited to the operators in `UPDATE_OPERATORS` (see validate.ts). */
export type Update = Record<string, Record<string, unknown>>;
export type SortSpec = Record<string, 1 | -1>;
export type Projection = Record<string, 0 | 1 | boolean>;

export interface FindOptions {
  sort?: SortSpec;
  limit?: number;
  projection?: Projection;
}

export interface UpdateOptions {
  upsert?: boolean;
}

export interface UpdateResult {
  matchedCount: number;
  modifiedCount: number;
  /** Set when the update inserted a document (`upsert: true` and nothing matched). */
  upsertedId?: string;
}

export interface DeleteResult {
  deletedCount: number;
}

export interface IndexOptions {
  /** Only `unique: true` is supported: the store keeps unique indexes, nothing else. */
  unique: true;
  /** Default: the MongoDB-style name, e.g. `organization_id_1_name_1`. */
  name?: string;
  /** Skip documents that lack every indexed field (otherwise a missing field indexes as null, as in MongoDB). */
  sparse?: boolean;
}

export interface IndexSpec {
  name: string;
  fields: string[];
  sparse: boolean;
}

/** One collection of a store; every method validates its input and fails with a typed `StoreError`. */
export interface Collection<T extends Document = Document> {
  readonly name: string;
  findOne(filter?: Filter, options?: Omit<FindOptions, 'limit'>): Promise<T | null>;
  find(filter?: Filter, options?: FindOptions): Promise<T[]>;
  insertOne(document: NewDocument): Promise<{ insertedId: string }>;
  updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult>;
  updateMany(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult>;
  deleteOne(filter: Filter): Promise<DeleteResult>;
  deleteMany(filter: Filter): Promise<DeleteResult>;
  countDocuments(filter?: Filter): Promise<number>;
  /** Idempotent for an identical definition; fails with `DuplicateKeyError` when existing documents collide. */
  createIndex(fields: Record<string, 1>, options: IndexOptions): Promise<string>;
}

/** Told the name of a collection this store instance has just written. */
export type ChangeListener = (collection: string) => void;

/**
 * The data layer: one interface, an embedded SQLite, a PostgreSQL and a MongoDB backend. Collection names are free; the
 * SPEC 7.2 ones (documents.ts) also have a document schema and standard unique indexes.
 */
export interface Store {
  readonly backend: 'embedded' | 'postgres' | 'mongodb';
  collection<T extends Document = Document>(name: string): Collection<T>;
  /** A handle that confines every operation to one organization (see scoped.ts). */
  forOrganization(organizationId: string): OrganizationScope;
  /**
   * An opaque token that changes whenever any of the named collections is written, by this process or any
   * other one sharing the store. Caches compare it to decide whether to drop their entries. A networked store
   * answers it from its change feed without a query while the feed is live (another process's write shows once
   * its notification arrives, a moment after that write's commit; this process's own at once), and reads its
   * counters otherwise.
   */
  changeToken(collections: readonly string[]): Promise<string>;
  /**
   * Writes made through this store instance, reported at once; on a store with a live change feed (PostgreSQL
   * `LISTEN/NOTIFY`, MongoDB change streams) also other processes' and hosts' writes, as they commit. What a
   * listener does not hear of, `changeToken` still shows.
   */
  onChange(listener: ChangeListener): () => void;
  close(): Promise<void>;
  /** The store this one decorates (sealing secrets, say), if any: the one that answers, and whose state caches share. */
  readonly decorated?: Store;
}

export interface OrganizationScope {
  readonly organizationId: string;
  collection<T extends Document = Document>(name: string): Collection<T>;
}
