import { assertCollectionDocument } from '../documents.js';
import { DuplicateKeyError, InvalidInputError } from '../errors.js';
import { newId } from '../ids.js';
import { describeKey, indexKeys, indexSpec, planLookup } from '../indexes.js';
import { applyUpdate, seedFromFilter } from '../updates.js';
import { assertFilter, assertFindOptions, assertUpdate, serializeDocument } from '../validate.js';
import type {
  Collection, DeleteResult, Document, Filter, FindOptions, IndexOptions, IndexSpec, NewDocument, Update, UpdateOptions, UpdateResult,
} from '../types.js';
import { arrange } from './arrange.js';
import { compileFilter } from './filter.js';
import { isConstraint } from './sqlite.js';
import type { EmbeddedBackend } from './backend.js';

type Row = Record<string, unknown> & { _id: string };

/** One collection of the embedded store; query semantics come from mingo over the stored JSON. */
export class EmbeddedCollection<T extends Document> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly store: EmbeddedBackend,
  ) {}

  async findOne(filter: Filter = {}, options: Omit<FindOptions, 'limit'> = {}): Promise<T | null> {
    assertFindOptions(options);
    const [first] = await this.query(filter, options.sort, 1, options.projection);
    return first ?? null;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    assertFindOptions(options);
    return this.query(filter, options.sort, options.limit ?? 0, options.projection);
  }

  /** `findOne` and `find`; synchronous unless another process holds a lock (see `EmbeddedStore.read`). */
  private query(filter: Filter, sort: FindOptions['sort'], limit: number, projection: FindOptions['projection']): T[] | Promise<T[]> {
    assertFilter(filter);
    const finish = (matches: Row[]): T[] => {
      if (!sort && !projection) return matches as T[];
      return arrange(matches, sort, limit, projection) as T[];
    };
    const matches = this.store.read(() => this.select(filter, this.store.indexesForRead(this.name), sort ? 0 : limit));
    return matches instanceof Promise ? matches.then(finish) : finish(matches);
  }

  async countDocuments(filter: Filter = {}): Promise<number> {
    assertFilter(filter);
    if (Object.keys(filter).length === 0) return this.store.read(() => this.store.statements.count.get(this.name) ?? 0);
    return (await this.store.read(() => this.select(filter, this.store.indexesForRead(this.name), 0))).length;
  }

  async insertOne(document: NewDocument): Promise<{ insertedId: string }> {
    const parsed = JSON.parse(serializeDocument(document)) as NewDocument;
    const row: Row = { _id: parsed._id ?? newId(), ...parsed };
    assertCollectionDocument(this.name, row);
    const text = JSON.stringify(row);
    return this.store.write(this.name, () => {
      this.insertRow(row, text, this.store.indexesForWrite(this.name));
      return { result: { insertedId: row._id }, counts: true };
    });
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
    const { statements } = this.store;
    // Every process ensures the standard indexes at start; an existing identical one needs no write lock.
    const known = this.store.indexesForRead(this.name).find((candidate) => candidate.name === spec.name);
    if (known && JSON.stringify(known) === JSON.stringify(spec)) return spec.name;
    return this.store.write(this.name, () => {
      const existing = this.store.indexesForWrite(this.name).find((candidate) => candidate.name === spec.name);
      if (existing) {
        if (JSON.stringify(existing) !== JSON.stringify(spec)) throw new InvalidInputError(`index ${spec.name} already exists with a different definition`);
        return { result: spec.name, counts: false };
      }
      for (const document of this.select({}, [], 0)) this.insertKeys(spec, document);
      statements.insertIndexDefinition.run(this.name, spec.name, JSON.stringify(spec));
      this.store.indexesForWrite(this.name);
      return { result: spec.name, counts: false };
    });
  }

  /** Matching documents in insertion order; `limit` 0 = all. Runs inside `read` or a write transaction. */
  private select(filter: Filter, specs: readonly IndexSpec[], limit: number): Row[] {
    const { statements } = this.store;
    const plan = planLookup(filter, specs);
    const test = plan?.exact ? undefined : compileFilter(filter);
    let texts: Iterable<string>;
    if (plan?.kind === 'ids') texts = plan.ids.map((id) => statements.documentById.get(this.name, id)).filter((text): text is string => text !== undefined);
    else if (plan?.kind === 'index') texts = statements.documentsByKey.all(this.name, plan.index, plan.key);
    else texts = statements.scan.iterate(this.name);
    const matches: Row[] = [];
    for (const text of texts) {
      const document = JSON.parse(text) as Row;
      if (test && !test(document)) continue;
      matches.push(document);
      if (limit > 0 && matches.length >= limit) break;
    }
    return matches;
  }

  private insertKeys(spec: IndexSpec, document: Row): void {
    for (const key of indexKeys(spec, document) ?? []) {
      try {
        this.store.statements.insertKey.run(this.name, spec.name, key, document._id);
      } catch (error) {
        if (isConstraint(error)) throw new DuplicateKeyError(this.name, spec.name, describeKey(spec, key), { cause: error });
        throw error;
      }
    }
  }

  private insertRow(row: Row, text: string, specs: readonly IndexSpec[]): void {
    try {
      this.store.statements.insertDocument.run(this.name, row._id, text);
    } catch (error) {
      if (isConstraint(error)) throw new DuplicateKeyError(this.name, '_id_', { _id: row._id }, { cause: error });
      throw error;
    }
    for (const spec of specs) this.insertKeys(spec, row);
  }

  private async update(filter: Filter, update: Update, options: UpdateOptions, many: boolean): Promise<UpdateResult> {
    assertFilter(filter);
    assertUpdate(update);
    const { statements } = this.store;
    return this.store.write<UpdateResult>(this.name, () => {
      const specs = this.store.indexesForWrite(this.name);
      const matches = this.select(filter, specs, many ? 0 : 1);
      let modifiedCount = 0;
      for (const document of matches) {
        if (!applyUpdate(document, update)) continue;
        const text = serializeDocument(document);
        statements.replaceDocument.run(text, this.name, document._id);
        statements.deleteKeys.run(this.name, document._id);
        for (const spec of specs) this.insertKeys(spec, document);
        modifiedCount += 1;
      }
      if (matches.length > 0 || !options.upsert) {
        return { result: { matchedCount: matches.length, modifiedCount }, counts: true };
      }
      const seeded = seedFromFilter(filter);
      applyUpdate(seeded, update);
      const row: Row = { _id: (seeded._id as string | undefined) ?? newId(), ...seeded };
      const text = serializeDocument(row);
      this.insertRow(row, text, specs);
      return { result: { matchedCount: 0, modifiedCount: 0, upsertedId: row._id }, counts: true };
    });
  }

  private async delete(filter: Filter, many: boolean): Promise<DeleteResult> {
    assertFilter(filter);
    const { statements } = this.store;
    return this.store.write(this.name, () => {
      const matches = this.select(filter, this.store.indexesForWrite(this.name), many ? 0 : 1);
      for (const document of matches) {
        statements.deleteDocument.run(this.name, document._id);
        statements.deleteKeys.run(this.name, document._id);
      }
      return { result: { deletedCount: matches.length }, counts: true };
    });
  }
}
