import type Database from 'better-sqlite3';
import type { IndexSpec } from '../types.js';

type Statement<P extends unknown[], R = unknown> = Database.Statement<P, R>;

export interface Statements {
  documentById: Statement<[string, string], string>;
  documentsByKey: Statement<[string, string, string], string>;
  scan: Statement<[string], string>;
  count: Statement<[string], number>;
  insertDocument: Statement<[string, string, string]>;
  replaceDocument: Statement<[string, string, string]>;
  deleteDocument: Statement<[string, string]>;
  insertKey: Statement<[string, string, string, string]>;
  deleteKeys: Statement<[string, string]>;
  indexDefinitions: Statement<[string], { name: string; spec: string }>;
  insertIndexDefinition: Statement<[string, string, string]>;
  bumpVersion: Statement<[string]>;
  versions: Statement<[string], { collection: string; version: number }>;
}

/** What an embedded collection needs of its store: the prepared statements, reads, and write transactions. */
export interface EmbeddedBackend {
  readonly statements: Statements;
  /** Index definitions for reads: may be a moment old. */
  indexesForRead(collection: string): IndexSpec[];
  /** Index definitions inside a write transaction: always current. */
  indexesForWrite(collection: string): IndexSpec[];
  /** Runs a read at once; only when another process holds a lock does it become an async retry. */
  read<T>(operation: () => T): T | Promise<T>;
  /** Runs `operation` in one write transaction that also counts a write to `collection` unless `counts` is false. */
  write<T>(collection: string, operation: () => { result: T; counts: boolean }): Promise<T>;
}
