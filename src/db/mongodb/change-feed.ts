import type { ChangeStream, ChangeStreamDocument, Collection } from 'mongodb';
import { CounterMirror, feedRetryDelayMs } from '../change-feed.js';

type Counter = { _id: string; version: number };

/** `$changeStream` refused: a standalone server (40573), or one that does not know the stage (40324). */
const UNSUPPORTED_CODES = new Set([40573, 40324]);
const WRITES = [{ $match: { operationType: { $in: ['insert', 'update', 'replace'] } } }];

/**
 * MongoDB's change feed for the caches of one process: a change stream on the counters collection (one cursor on
 * a connection of the client's pool), the twin of the PostgreSQL feed. Once the stream is open the counters are
 * read once; from then on `counters` answers change tokens without a query and each counter bump, by any
 * process, reaches `changed`. The driver resumes the stream by itself after a passing error (no event is lost);
 * any other error reopens it after a backoff and reads the counters again. A server without change streams
 * leaves the caches polling the counters.
 */
export class MongoChangeFeed {
  readonly counters = new CounterMirror();
  private stream: ChangeStream<Counter, ChangeStreamDocument<Counter>> | undefined;
  private started = false;
  private closed = false;
  private attempt = 0;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly versions: () => Collection<Counter>,
    private readonly changed: (collection: string) => void,
    /**
     * How long the server holds each `getMore` of the stream when nothing changes: the stream's only traffic
     * while idle, one round trip per period. Below the client's socket timeout, which would cut it off.
     */
    private readonly maxAwaitTimeMs = 5_000,
  ) {}

  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.follow();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.counters.live = false;
    await this.stream?.close().catch(() => undefined);
  }

  private async follow(): Promise<void> {
    let supported = true;
    try {
      const stream = this.versions().watch<Counter, ChangeStreamDocument<Counter>>(WRITES, { maxAwaitTimeMS: this.maxAwaitTimeMs });
      this.stream = stream;
      // The first answer means the stream is open: every bump from here on is delivered, earlier ones are read.
      const first = await stream.tryNext();
      const rows = await this.versions().find({ version: { $gt: 0 } }).toArray();
      const moved = this.counters.seed(rows.map((row) => [row._id, row.version] as const));
      this.counters.live = !this.closed;
      this.attempt = 0;
      for (const collection of moved) this.changed(collection);
      if (first) this.heard(first);
      for await (const change of stream) this.heard(change);
    } catch (error) {
      supported = !UNSUPPORTED_CODES.has((error as { code?: number }).code ?? 0);
    }
    this.counters.live = false;
    await this.stream?.close().catch(() => undefined);
    if (this.closed || !supported) return;
    this.retry = setTimeout(() => void this.follow(), feedRetryDelayMs(this.attempt++));
    this.retry.unref();
  }

  private heard(change: ChangeStreamDocument<Counter>): void {
    if (change.operationType !== 'insert' && change.operationType !== 'update' && change.operationType !== 'replace') return;
    const version = change.operationType === 'update' ? change.updateDescription.updatedFields?.version : change.fullDocument?.version;
    // A counter created at 0 (before its collection's first write) is no change.
    if (typeof version !== 'number' || version <= 0) return;
    if (this.counters.observe(change.documentKey._id, version)) this.changed(change.documentKey._id);
  }
}
