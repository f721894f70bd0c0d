import { rmSync } from 'node:fs';
import path from 'node:path';
import { FAST, ServerProcess, tempDir, type ServerEvent } from '../helpers/server-process.js';

const PLUGIN_FIXTURE = path.resolve(import.meta.dirname, '..', 'fixtures', 'plugin-server.mjs');

export interface PluginSpec {
  name: string;
  record?: boolean;
  env?: Record<string, string>;
  workers?: number;
  fail?: string;
  child?: PluginSpec;
  uninstallFails?: boolean;
  probe?: boolean;
}

/**
 * Spawns test/fixtures/plugin-server.mjs in its own process group; the teardown (kill the group, remove the
 * data directory) is registered before anything is awaited. Does not wait for the start: see `started`.
 */
export function spawnPluginServer(t: { teardown(fn: () => unknown): void }, config: Record<string, unknown>, plugins: PluginSpec[]): ServerProcess {
  const dataDir = tempDir('fleetplane-plugins-');
  const server = ServerProcess.spawn(PLUGIN_FIXTURE, { dataDir, http: { port: 0, host: '127.0.0.1' }, ...FAST, ...config }, { FIXTURE_PLUGINS: JSON.stringify(plugins) });
  t.teardown(async () => {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return server;
}

export function started(server: ServerProcess): Promise<ServerEvent> {
  return server.started();
}
