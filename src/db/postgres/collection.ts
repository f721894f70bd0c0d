import { createHash } from 'node:crypto';
import type { QueryResult, QueryResultRow } from 'pg';
import { assertCollectionDocument } from '../documents.js';
import { DuplicateKeyError, InvalidInputError } from '../errors.js';
import { newId } from '../ids.js';
import { describeKey, indexKeys, indexSpec, planLookup } from '../indexes.js';
import { applyUpdate, seedFromFilter } from '../updates.js';
import { assertFilter, assertFindOptions, assertUpdate, serializeDocument } from '../validate.js';
import type {
  Collection, DeleteResult, Document, Filter, FindOptions, IndexOptions, IndexSpec, NewDocument, Update, UpdateOptions, UpdateResult,
} from '../types.js';
// The embedded store's own evaluation, sort and projection: both backends answer a query with the same code.
import { arrange } from '../embedded/arrange.js';
import { compileFilter } from '../embedded/filter.js';
import { holdsNul, pushdown } from './pushdown.js';

type Row = Record<string, unknown> & { _id: string };

/** A pooled connection or the one of a write transaction. */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}

/** What a collection needs of its store (store.ts). */
export interface PostgresBackend {
  read<T>(collection: string, operation: (db: Queryable) => Promise<T>): Promise<T>;
  write<T>(collection: string, counts: boolean, operation: (db: Queryable) => Promise<T>): Promise<T>;
  indexesForRead(collection: string): Promise<IndexSpec[]>;
  indexesForWrite(db: Queryable, collection: string): Promise<IndexSpec[]>;
  forgetIndexes(collection: string): void;
}

/** Rows a selection that must go on past a limit (the filter is evaluated here, not in SQL) reads at a time. */
const PAGE_ROWS = 256;
/** A NUL escape in JSON text that is not itself an escaped backslash followed by "u0000". */
const NUL_ESCAPE = /(^|[^\\])(\\\\)*\\u0000/;

const digestOf = (key: string) => createHash('sha256').update(key).digest('hex');
const parse = (rows: Array<{ doc: string }>) => rows.map((row) => JSON.parse(row.doc) as Row);

/**
 * A document's JSON text for a jsonb column: within the size limit, and without NUL characters, which
 * PostgreSQL text cannot hold (the one value this backend refuses that the others keep).
 */
function storable(document: Row): string {
  const text = serializeDocument(document);
  if (NUL_ESCAPE.test(text)) throw new InvalidInputError('a string holds a NUL character, which the PostgreSQL store cannot keep');
  return text;
}

/** One collection of the PostgreSQL store; query semantics are the embedded store's, over jsonb documents. */
export class PostgresCollection<T extends Document> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly store: PostgresBackend,
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

  private async query(filter: Filter, sort: FindOptions['sort'], limit: number, projection: FindOptions['projection']): Promise<T[]> {
    assertFilter(filter);
    const specs = await this.store.indexesForRead(this.name);
    const matches = await this.store.read(this.name, (db) => this.select(db, filter, specs, sort ? 0 : limit));
    if (!sort && !projection) return matches as T[];
    return arrange(matches, sort, limit, projection) as T[];
  }

  async countDocuments(filter: Filter = {}): Promise<number> {
    assertFilter(filter);
    if (Object.keys(filter).length === 0) {
      const { rows } = await this.store.read(this.name, (db) => db.query<{ count: number }>('SELECT count(*)::int AS count FROM fleetplane_documents WHERE collection = $1', [this.name]));
      return rows[0]?.count ?? 0;
    }
    const specs = await this.store.indexesForRead(this.name);
    return (await this.store.read(this.name, (db) => this.select(db, filter, specs, 0))).length;
  }

  async insertOne(document: NewDocument): Promise<{ insertedId: string }> {
    const parsed = JSON.parse(serializeDocument(document)) as NewDocument;
    const row: Row = { _id: parsed._id ?? newId(), ...parsed };
    assertCollectionDocument(this.name, row);
    const text = storable(row);
    return this.store.write(this.name, true, async (db) => {
      await this.insertRow(db, row, text, await this.store.indexesForWrite(db, this.name));
      return { insertedId: row._id };
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
    const same = (candidate: IndexSpec) => JSON.stringify(candidate) === JSON.stringify(spec);
    // Every process ensures the standard indexes at start; an existing identical one needs no write lock.
    const known = (await this.store.indexesForRead(this.name)).find((candidate) => candidate.name === spec.name);
    if (known && same(known)) return spec.name;
    try {
      return await this.store.write(this.name, false, async (db) => {
        const existing = (await this.store.indexesForWrite(db, this.name)).find((candidate) => candidate.name === spec.name);
        if (existing) {
          if (!same(existing)) throw new InvalidInputError(`index ${spec.name} already exists with a different definition`);
          return spec.name;
        }
        const { rows } = await db.query<{ doc: string }>('SELECT doc::text AS doc FROM fleetplane_documents WHERE collection = $1 ORDER BY seq', [this.name]);
        await this.insertKeys(db, [spec], parse(rows));
        await db.query('INSERT INTO fleetplane_indexes (collection, name, spec) VALUES ($1, $2, $3)', [this.name, spec.name, JSON.stringify(spec)]);
        return spec.name;
      });
    } finally {
      // Read inside the transaction, the definitions were not yet committed: the next read loads them again.
      this.store.forgetIndexes(this.name);
    }
  }

  /**
   * Matching documents in insertion order; `limit` 0 = all. The SQL selects a superset: the rows a lookup plan
   * (`_id`, a unique index's key) or the pushed-down conditions allow; the whole filter is then evaluated here,
   * unless the plan alone is exact.
   */
  private async select(db: Queryable, filter: Filter, specs: readonly IndexSpec[], limit: number): Promise<Row[]> {
    const plan = planLookup(filter, specs);
    const exact = plan ? plan.exact : Object.keys(filter).length === 0;
    const test = exact ? undefined : compileFilter(filter);
    const values: unknown[] = [this.name];
    let from = 'fleetplane_documents d';
    const where = ['d.collection = $1'];
    if (plan?.kind === 'ids') {
      const ids = plan.ids.filter((id) => !holdsNul(id));
      if (ids.length === 0) return [];
      values.push(ids);
      where.push('d.id = ANY($2::text[])');
    } else if (plan?.kind === 'index') {
      values.push(plan.index, digestOf(plan.key));
      from += ' JOIN fleetplane_unique_keys u ON u.collection = d.collection AND u.doc_id = d.id';
      where.push('u.index_name = $2', "u.digest = decode($3, 'hex')");
    } else {
      where.push(...pushdown(filter, values));
    }
    const select = `SELECT d.seq::text AS seq, d.doc::text AS doc FROM ${from} WHERE ${where.join(' AND ')}`;
    if (limit === 0 || exact) {
      const { rows } = await db.query<{ doc: string }>(`${select} ORDER BY d.seq${limit > 0 ? ` LIMIT ${limit}` : ''}`, values);
      const documents = parse(rows);
      return test ? documents.filter((document) => test(document)) : documents;
    }
    // A limit with a filter evaluated here: read in pages until enough rows matched, not the whole collection.
    const matches: Row[] = [];
    const after = `$${values.push('0')}`;
    for (;;) {
      const { rows } = await db.query<{ seq: string; doc: string }>(`${select} AND d.seq > ${after}::bigint ORDER BY d.seq LIMIT ${PAGE_ROWS}`, values);
      for (const document of parse(rows)) {
        if (test!(document)) matches.push(document);
        if (matches.length >= limit) return matches;
      }
      if (rows.length < PAGE_ROWS) return matches;
      values[values.length - 1] = rows.at(-1)!.seq;
    }
  }

  /** Inserts a document and its unique keys; the `_id` is checked by the primary key. */
  private async insertRow(db: Queryable, row: Row, text: string, specs: readonly IndexSpec[]): Promise<void> {
    const inserted = await db.query('INSERT INTO fleetplane_documents (collection, id, doc) VALUES ($1, $2, $3::jsonb) ON CONFLICT (collection, id) DO NOTHING', [this.name, row._id, text]);
    if (inserted.rowCount === 0) throw new DuplicateKeyError(this.name, '_id_', { _id: row._id });
    await this.insertKeys(db, specs, [row]);
  }

  /**
   * The unique keys of `documents` (whose previous keys are gone), in one statement. A key another document
   * holds is not inserted (`ON CONFLICT DO NOTHING` keeps the transaction usable) and named in the
   * `DuplicateKeyError` that rolls the whole write back; two of `documents` sharing a key are caught here.
   */
  private async insertKeys(db: Queryable, specs: readonly IndexSpec[], documents: readonly Row[]): Promise<void> {
    const entries: Array<{ spec: IndexSpec; key: string; digest: string; id: string }> = [];
    const seen = new Set<string>();
    for (const document of documents) {
      for (const spec of specs) {
        for (const key of indexKeys(spec, document) ?? []) {
          const digest = digestOf(key);
          const slot = `${spec.name}\0${digest}`;
          if (seen.has(slot)) throw new DuplicateKeyError(this.name, spec.name, describeKey(spec, key));
          seen.add(slot);
          entries.push({ spec, key, digest, id: document._id });
        }
      }
    }
    if (entries.length === 0) return;
    const { rows } = await db.query<{ index_name: string; digest: string }>(
      `INSERT INTO fleetplane_unique_keys (collection, index_name, digest, key, doc_id)
       SELECT $1, u.index_name, decode(u.digest, 'hex'), u.key, u.doc_id FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS u (index_name, digest, key, doc_id)
       ON CONFLICT DO NOTHING RETURNING index_name, encode(digest, 'hex') AS digest`,
      [this.name, entries.map((entry) => entry.spec.name), entries.map((entry) => entry.digest), entries.map((entry) => entry.key), entries.map((entry) => entry.id)],
    );
    if (rows.length === entries.length) return;
    const inserted = new Set(rows.map((row) => `${row.index_name}\0${row.digest}`));
    const taken = entries.find((entry) => !inserted.has(`${entry.spec.name}\0${entry.digest}`))!;
    throw new DuplicateKeyError(this.name, taken.spec.name, describeKey(taken.spec, taken.key));
  }

  private async update(filter: Filter, update: Update, options: UpdateOptions, many: boolean): Promise<UpdateResult> {
    assertFilter(filter);
    assertUpdate(update);
    return this.store.write<UpdateResult>(this.name, true, async (db) => {
      const specs = await this.store.indexesForWrite(db, this.name);
      const matches = await this.select(db, filter, specs, many ? 0 : 1);
      const changed: Row[] = [];
      const texts: string[] = [];
      for (const document of matches) {
        if (!applyUpdate(document, update)) continue;
        texts.push(storable(document));
        changed.push(document);
      }
      if (changed.length > 0) {
        const ids = changed.map((document) => document._id);
        await db.query(
          'UPDATE fleetplane_documents d SET doc = u.doc::jsonb FROM unnest($2::text[], $3::text[]) AS u (id, doc) WHERE d.collection = $1 AND d.id = u.id',
          [this.name, ids, texts],
        );
        if (specs.length > 0) {
          await db.query('DELETE FROM fleetplane_unique_keys WHERE collection = $1 AND doc_id = ANY($2::text[])', [this.name, ids]);
          await this.insertKeys(db, specs, changed);
        }
      }
      if (matches.length > 0 || !options.upsert) return { matchedCount: matches.length, modifiedCount: changed.length };
      const seeded = seedFromFilter(filter);
      applyUpdate(seeded, update);
      const row: Row = { _id: (seeded._id as string | undefined) ?? newId(), ...seeded };
      await this.insertRow(db, row, storable(row), specs);
      return { matchedCount: 0, modifiedCount: 0, upsertedId: row._id };
    });
  }

  private async delete(filter: Filter, many: boolean): Promise<DeleteResult> {
    assertFilter(filter);
    return this.store.write(this.name, true, async (db) => {
      const matches = await this.select(db, filter, await this.store.indexesForWrite(db, this.name), many ? 0 : 1);
      // Their unique keys go with them (ON DELETE CASCADE).
      if (matches.length > 0) await db.query('DELETE FROM fleetplane_documents WHERE collection = $1 AND id = ANY($2::text[])', [this.name, matches.map((document) => document._id)]);
      return { deletedCount: matches.length };
    });
  }
}
