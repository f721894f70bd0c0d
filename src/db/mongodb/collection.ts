import type { Collection as DriverCollection, Document as DriverDocument } from 'mongodb';
import { assertCollectionDocument } from '../documents.js';
import { newId } from '../ids.js';
import { indexSpec } from '../indexes.js';
import { seedFromFilter } from '../updates.js';
import { assertFilter, assertFindOptions, assertUpdate, serializeDocument } from '../validate.js';
import type {
  Collection, DeleteResult, Document, Filter, FindOptions, IndexOptions, NewDocument, Update, UpdateOptions, UpdateResult,
} from '../types.js';
import { toStoreError } from './errors.js';

/** One MongoDB collection behind the store interface; input is validated exactly as in the embedded backend. */
export class MongoCollection<T extends Document> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly driver: DriverCollection<DriverDocument & { _id: string }>,
    private readonly changed: (collection: string) => Promise<void>,
  ) {}

  private async run<R>(operation: () => Promise<R>): Promise<R> {
    try {
      return await operation();
    } catch (error) {
      throw toStoreError(this.name, error);
    }
  }

  async findOne(filter: Filter = {}, options: Omit<FindOptions, 'limit'> = {}): Promise<T | null> {
    assertFilter(filter);
    assertFindOptions(options);
    return this.run(() => this.driver.findOne(filter, { sort: options.sort, projection: options.projection }) as Promise<T | null>);
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    assertFilter(filter);
    assertFindOptions(options);
    const { sort, limit = 0, projection } = options;
    return this.run(() => this.driver.find(filter, { sort, limit, projection }).toArray() as unknown as Promise<T[]>);
  }

  async countDocuments(filter: Filter = {}): Promise<number> {
    assertFilter(filter);
    return this.run(() => this.driver.countDocuments(filter));
  }

  async insertOne(document: NewDocument): Promise<{ insertedId: string }> {
    const parsed = JSON.parse(serializeDocument(document)) as NewDocument;
    const row = { _id: parsed._id ?? newId(), ...parsed };
    assertCollectionDocument(this.name, row);
    await this.run(() => this.driver.insertOne(row));
    await this.changed(this.name);
    return { insertedId: row._id };
  }

  updateOne(filter: Filter, update: Update, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.update(filter, update, options, false);
  }

  updateMany(filter: Filter, update: Update, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.update(filter, update, options, true);
  }

  deleteOne(filter: Filter): Promise<DeleteResult> {
    return this.delete(filter, false);
  }

  deleteMany(filter: Filter): Promise<DeleteResult> {
    return this.delete(filter, true);
  }

  async createIndex(fields: Record<string, 1>, options: IndexOptions): Promise<string> {
    const spec = indexSpec(fields, options);
    return this.run(() => this.driver.createIndex(fields, { unique: true, name: spec.name, sparse: spec.sparse }));
  }

  private async update(filter: Filter, update: Update, options: UpdateOptions, many: boolean): Promise<UpdateResult> {
    assertFilter(filter);
    assertUpdate(update);
    // MongoDB would give an upserted document an ObjectId; the store's ids are strings on both backends.
    const upsertId = options.upsert && seedFromFilter(filter)._id === undefined ? { $setOnInsert: { _id: newId() } } : {};
    const modifier = { ...update, ...upsertId };
    const upsert = options.upsert === true;
    const result = await this.run(() => (many ? this.driver.updateMany(filter, modifier, { upsert }) : this.driver.updateOne(filter, modifier, { upsert })));
    const upsertedId = result.upsertedId === null || result.upsertedId === undefined ? undefined : String(result.upsertedId);
    if (result.modifiedCount > 0 || upsertedId) await this.changed(this.name);
    return { matchedCount: result.matchedCount, modifiedCount: result.modifiedCount, ...(upsertedId ? { upsertedId } : {}) };
  }

  private async delete(filter: Filter, many: boolean): Promise<DeleteResult> {
    assertFilter(filter);
    const result = await this.run(() => (many ? this.driver.deleteMany(filter) : this.driver.deleteOne(filter)));
    if (result.deletedCount > 0) await this.changed(this.name);
    return { deletedCount: result.deletedCount };
  }
}
