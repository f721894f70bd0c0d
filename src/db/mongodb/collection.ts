import type { ClientSession, Collection as DriverCollection, Document as DriverDocument } from 'mongodb';
import { assertCollectionDocument } from '../documents.js';
import { DocumentTooLargeError } from '../errors.js';
import { newId } from '../ids.js';
import { indexSpec } from '../indexes.js';
import { seedFromFilter } from '../updates.js';
import { assertFilter, assertFindOptions, assertUpdate, MAX_DOCUMENT_BYTES, serializeDocument } from '../validate.js';
import type {
  Collection, DeleteResult, Document, Filter, FindOptions, IndexOptions, NewDocument, Update, UpdateOptions, UpdateResult,
} from '../types.js';
import { toStoreError } from './errors.js';

type Row = DriverDocument & { _id: string };

/** What a collection needs of its store: write transactions that count the write (see `MongoStore.write`). */
export interface MongoWriter {
  write<T>(collection: string, operation: (session: ClientSession) => Promise<T>): Promise<T>;
}

/** One MongoDB collection behind the store interface; input is validated exactly as in the embedded backend. */
export class MongoCollection<T extends Document> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly driver: DriverCollection<Row>,
    private readonly writer: MongoWriter,
    private readonly operationTimeoutMs: number,
  ) {}

  private async read<R>(operation: () => Promise<R>): Promise<R> {
    try {
      return await operation();
    } catch (error) {
      throw toStoreError(this.name, error);
    }
  }

  async findOne(filter: Filter = {}, options: Omit<FindOptions, 'limit'> = {}): Promise<T | null> {
    assertFilter(filter);
    assertFindOptions(options);
    const { sort, projection } = options;
    return this.read(() => this.driver.findOne(filter, { sort, projection, maxTimeMS: this.operationTimeoutMs }) as Promise<T | null>);
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    assertFilter(filter);
    assertFindOptions(options);
    const { sort, limit = 0, projection } = options;
    return this.read(() => this.driver.find(filter, { sort, limit, projection, maxTimeMS: this.operationTimeoutMs }).toArray() as unknown as Promise<T[]>);
  }

  async countDocuments(filter: Filter = {}): Promise<number> {
    assertFilter(filter);
    return this.read(() => this.driver.countDocuments(filter, { maxTimeMS: this.operationTimeoutMs }));
  }

  async insertOne(document: NewDocument): Promise<{ insertedId: string }> {
    const parsed = JSON.parse(serializeDocument(document)) as NewDocument;
    const row = { _id: parsed._id ?? newId(), ...parsed };
    assertCollectionDocument(this.name, row);
    await this.writer.write(this.name, (session) => this.driver.insertOne(row, { session }));
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
    return this.read(() => this.driver.createIndex(fields, { unique: true, name: spec.name, sparse: spec.sparse }));
  }

  /**
   * Inside one transaction: the matching ids, the update on exactly those, then the size check of every
   * document it produced (MongoDB's own limit is 16 MiB, the store's 1 MiB), which aborts the whole write.
   */
  private async update(filter: Filter, update: Update, options: UpdateOptions, many: boolean): Promise<UpdateResult> {
    assertFilter(filter);
    assertUpdate(update);
    return this.writer.write(this.name, async (session) => {
      const matched = await this.driver.find(filter, { projection: { _id: 1 }, limit: many ? 0 : 1, session }).toArray();
      if (matched.length === 0 && options.upsert) return this.upsert(filter, update, session);
      if (matched.length === 0) return { matchedCount: 0, modifiedCount: 0 };
      const ids = matched.map((row) => row._id);
      const result = await this.driver.updateMany({ _id: { $in: ids } }, update, { session });
      await this.assertSizes(ids, session);
      return { matchedCount: matched.length, modifiedCount: result.modifiedCount };
    });
  }

  /** Nothing matched: insert what the filter and update describe, with a string id as on the embedded store. */
  private async upsert(filter: Filter, update: Update, session: ClientSession): Promise<UpdateResult> {
    const seededId = seedFromFilter(filter)._id as string | undefined;
    const upsertedId = seededId ?? newId();
    const modifier = seededId === undefined ? { ...update, $setOnInsert: { _id: upsertedId } } : update;
    await this.driver.updateOne(filter, modifier, { upsert: true, session });
    await this.assertSizes([upsertedId], session);
    return { matchedCount: 0, modifiedCount: 0, upsertedId };
  }

  private async assertSizes(ids: string[], session: ClientSession): Promise<void> {
    for (const document of await this.driver.find({ _id: { $in: ids } }, { session }).toArray()) {
      const bytes = Buffer.byteLength(JSON.stringify(document));
      if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(bytes, MAX_DOCUMENT_BYTES);
    }
  }

  private async delete(filter: Filter, many: boolean): Promise<DeleteResult> {
    assertFilter(filter);
    return this.writer.write(this.name, async (session) => {
      const result = many ? await this.driver.deleteMany(filter, { session }) : await this.driver.deleteOne(filter, { session });
      return { deletedCount: result.deletedCount };
    });
  }
}
