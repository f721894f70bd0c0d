import type pg from 'pg';
import { CounterMirror, feedRetryDelayMs } from '../change-feed.js';

/**
 * The notification channel of this database's Fleetplane tables: named after the counters table's oid, so that
 * two deployments in different schemas of one database never hear each other. Writers compute the same name in
 * the statement that bumps a counter (store.ts).
 */
export const CHANNEL_SQL = "'fleetplane_changes_' || 'fleetplane_collection_versions'::regclass::oid";

/** What the feed needs of its store. */
export interface PostgresChangeFeedDeps {
  /** A new, unconnected client for the listening connection (`listenerOptions`). */
  client(): pg.Client;
  /** Another process (or this one, heard back) committed a write to `collection`. */
  changed(collection: string): void;
}

/**
 * PostgreSQL's change feed for the caches of one process: one connection of its own (outside the pool) that
 * LISTENs on the channel every write notifies in its transaction (`pg_notify` with the counter's new value,
 * delivered only once that transaction commits, in commit order), then reads every counter once. From then on
 * `counters` answers change tokens without a query and each commit elsewhere reaches `changed` as it happens.
 * When the connection drops, the mirror stops answering (tokens are read from the store, at most every
 * `revalidateMs` per cache, as without a feed) and the feed reconnects with a backoff; back up, it reads the
 * counters again and reports the collections written meanwhile, so caches re-validate once.
 */
export class PostgresChangeFeed {
  readonly counters = new CounterMirror();
  private client: pg.Client | undefined;
  private started = false;
  private closed = false;
  private attempt = 0;
  private retry: NodeJS.Timeout | undefined;

  constructor(private readonly deps: PostgresChangeFeedDeps) {}

  /** Opens the listening connection on first use, so a command that caches nothing never holds one. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.connect();
  }

  get live(): boolean {
    return this.counters.live;
  }

  /** The listening connection's server process while it is up (pg_stat_activity.pid). */
  get backendPid(): number | undefined {
    return this.live ? (this.client as unknown as { processID?: number } | undefined)?.processID : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    this.counters.live = false;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = this.deps.client();
    this.client = client;
    // A server that goes away reports on both; either one means the feed may have missed a commit.
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    let channel: string | undefined;
    client.on('notification', (message) => {
      if (message.channel === channel) this.heard(message.payload);
    });
    try {
      await client.connect();
      const named = await client.query<{ channel: string }>(`SELECT ${CHANNEL_SQL} AS channel`);
      channel = named.rows[0]!.channel;
      await client.query(`LISTEN ${channel}`);
      // Read after LISTEN: a commit is either in this snapshot or notified from here on, never neither.
      const { rows } = await client.query<{ collection: string; version: string }>('SELECT collection, version::text AS version FROM fleetplane_collection_versions WHERE version > 0');
      if (this.client !== client) return;
      const moved = this.counters.seed(rows.map((row) => [row.collection, Number(row.version)] as const));
      this.counters.live = true;
      this.attempt = 0;
      for (const collection of moved) this.deps.changed(collection);
    } catch {
      this.lost(client);
    }
  }

  /** `<version> <collection>`, or `*` for a collection whose name is too long for a notification. */
  private heard(payload: string | undefined): void {
    const space = payload?.indexOf(' ') ?? -1;
    if (!payload || space < 0) {
      this.counters.forget();
      return;
    }
    const collection = payload.slice(space + 1);
    if (this.counters.observe(collection, Number(payload.slice(0, space)))) this.deps.changed(collection);
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.counters.live = false;
    void client.end().catch(() => undefined);
    if (this.closed) return;
    this.retry = setTimeout(() => void this.connect(), feedRetryDelayMs(this.attempt++));
    this.retry.unref();
  }
}
