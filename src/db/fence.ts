import type { Filter } from './types.js';

/**
 * A fencing token: the lease a write was decided under and the term it was decided in. A document written by a
 * fenced write keeps the highest term that wrote it (`fence: { lease, term }`), and a fenced write is a
 * conditional one whose filter requires the stored term to be at most its own (or none). A holder that lost its
 * lease without hearing of it (paused, cut from the store, its clock behind by more than the skew assumed) writes
 * with its old term: once a newer holder wrote a document, the store refuses that document to the old one.
 */
export interface Fence {
  /** The lease's name, e.g. `decider:<cluster>`: terms of different leases are not compared. */
  lease: string;
  term: number;
}

/** The condition a fenced write adds: no later term of the same lease wrote the document. */
function admits(fence: Fence): Filter {
  return { $or: [{ 'fence.lease': { $ne: fence.lease } }, { 'fence.term': { $exists: false } }, { 'fence.term': { $lte: fence.term } }] };
}

/** `filter`, narrowed to the documents `fence` may still write. */
export const fencedFilter = (filter: Filter, fence: Fence): Filter => ({ $and: [filter, admits(fence)] });

/** `filter`, narrowed to the documents a later term of `fence`'s lease wrote: those refuse a write fenced by it. */
export const laterFenceFilter = (filter: Filter, fence: Fence): Filter => ({ $and: [filter, { 'fence.lease': fence.lease, 'fence.term': { $gt: fence.term } }] });

/** What a fenced write sets besides its own fields: its term, now the highest that wrote the document. */
export const fenceMark = (fence: Fence): { fence: Fence } => ({ fence: { lease: fence.lease, term: fence.term } });

/** A fenced write the store refused: a later term of the lease wrote the document. The writer must stop acting. */
export class FencedWriteRefused extends Error {
  constructor(
    readonly fence: Fence,
    what: string,
  ) {
    super(`${what} refused: a term after ${fence.term} of ${fence.lease} wrote it (another holder took the lease over)`);
    this.name = 'FencedWriteRefused';
  }
}
