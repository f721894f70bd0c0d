import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { WAL_SIZE_LIMIT_BYTES, openDatabase } from '../../../src/db/embedded/sqlite.js';

function tempFile(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-wal-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'store.db');
}

t.test('every connection limits the -wal file kept on disk', async (t) => {
  const db = await openDatabase(tempFile(t));
  t.teardown(() => db.close());
  t.equal(db.pragma('journal_size_limit', { simple: true }), WAL_SIZE_LIMIT_BYTES);
});

t.test('a -wal file that grew while a reader held the log is cut back to the limit once the log starts over', async (t) => {
  const file = tempFile(t);
  const limit = 256 * 1024;
  const db = await openDatabase(file, { walSizeLimitBytes: limit });
  const reader = new Database(file);
  t.teardown(() => {
    reader.close();
    db.close();
  });
  const insert = db.prepare("INSERT INTO documents (collection, id, doc) VALUES ('soak', ?, ?)");
  const doc = JSON.stringify({ payload: 'x'.repeat(3_000) });
  // Another process in the middle of a read: no checkpoint may let the log start over, so it grows.
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM documents').get();
  for (let index = 0; index < 600; index += 1) insert.run(`a${index}`, doc);
  const grown = statSync(`${file}-wal`).size;
  t.ok(grown > 16 * limit, `the log grew to ${grown} bytes while the reader held it`);

  reader.exec('COMMIT');
  db.pragma('wal_checkpoint(PASSIVE)');
  insert.run('b', doc);
  const after = statSync(`${file}-wal`).size;
  t.ok(after <= limit, `the log is ${after} bytes once it started over (limit ${limit})`);
  t.equal((db.prepare("SELECT count(*) AS count FROM documents WHERE collection = 'soak'").get() as { count: number }).count, 601, 'every write is there');
});
