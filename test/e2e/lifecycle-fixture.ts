import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { CLI, FAST, ServerProcess, cleanEnv, tempDir } from '../helpers/server-process.js';
import { scaled } from '../helpers/wait.js';

const FIXTURE = path.resolve(import.meta.dirname, '..', 'fixtures', 'lifecycle-server.mjs');

/** `fleetplane <args>` against a data directory, failing loudly. */
export function cli(...args: string[]): string {
  const result = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: cleanEnv(), timeout: scaled(30_000) });
  if (result.status !== 0) throw new Error(`fleetplane ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

/** A data directory with its platform organization, and resources applied to it. */
export function platformDataDir(resources?: Record<string, unknown>): { dataDir: string; organizationId: string } {
  const dataDir = tempDir('fleetplane-lifecycle-e2e-');
  const { organization_id } = JSON.parse(cli('init', '--data-dir', dataDir, '--json')) as { organization_id: string };
  if (resources) {
    const file = path.join(dataDir, 'resources.json');
    writeFileSync(file, JSON.stringify(resources));
    cli('apply', '-f', file, '--data-dir', dataDir);
  }
  return { dataDir, organizationId: organization_id };
}

/**
 * test/fixtures/lifecycle-server.mjs in its own process group; the teardown kills the group. Does not wait for
 * the start.
 */
export function spawnLifecycleServer(t: { teardown(fn: () => unknown): void }, config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): ServerProcess {
  const server = ServerProcess.spawn(FIXTURE, { http: { port: 0, host: '127.0.0.1' }, mesh: { enabled: false }, ...FAST, log: { level: 'info' }, ...config }, env);
  t.teardown(() => server.stop());
  return server;
}
