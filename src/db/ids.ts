import { randomBytes } from 'node:crypto';

/**
 * New document ids: 12 hex digits of milliseconds, then 12 random hex digits. Ordering by `_id` follows
 * creation time (as MongoDB's ObjectIds do), which "first organization" and "ordered by id" lookups rely on,
 * and the ids are plain strings so both backends store the same value.
 */
export function newId(now = Date.now()): string {
  return now.toString(16).padStart(12, '0') + randomBytes(6).toString('hex');
}
