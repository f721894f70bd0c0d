import { rmSync } from 'node:fs';
import path from 'node:path';
import { FAST, ServerProcess, tempDir } from '../helpers/server-process.js';
import type { JsonValue } from '../../src/storage/json-value.js';
import type { EventRecord } from './history.js';

export const STORAGE_FIXTURE = path.resolve(import.meta.dirname, '..', 'fixtures', 'storage-server.mjs');

/** What one process of the fixture reports: its entries and revision now, its events, and its state when built. */
export interface ProcessReport {
  name: string;
  pid: number;
  revision: number;
  entries: Array<[string, JsonValue]>;
  events: EventRecord[];
  built: { revision: number; status: string; entries: Array<[string, JsonValue]> };
}

/**
 * Starts test/fixtures/storage-server.mjs in its own process group. The teardown (kill the group, remove the
 * data directory) is registered before anything is awaited, so a test that fails while starting leaks nothing.
 */
export async function startStorageServer(t: { teardown(fn: () => unknown): void }, config: Record<string, unknown>): Promise<ServerProcess> {
  const dataDir = tempDir('fleetplane-storage-');
  const server = ServerProcess.spawn(STORAGE_FIXTURE, { dataDir, http: { port: 0, host: '127.0.0.1' }, ...FAST, ...config });
  t.teardown(async () => {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  await server.started();
  return server;
}
