// What the scripts that run Fleetplane beside a real third-party tool share: the built server, a platform
// key, free ports, waiting for conditions, and killing what they started.
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const dist = (file) => path.join(root, 'dist', file);

/** A data directory whose store has the platform organization (hosts 127.0.0.1, localhost) and its admin key. */
export async function platformKey(dataDir) {
  const { EmbeddedStore } = await import(dist('src/db/embedded/store.js'));
  const { ensureStandardIndexes } = await import(dist('src/db/open.js'));
  const { initializeStore } = await import(dist('src/auth/bootstrap.js'));
  mkdirSync(dataDir, { recursive: true });
  const store = await EmbeddedStore.open(path.join(dataDir, 'fleetplane.db'));
  try {
    await ensureStandardIndexes(store);
    return (await initializeStore(store, { name: 'platform', hosts: ['127.0.0.1', 'localhost'] })).key;
  } finally {
    await store.close();
  }
}

export function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

export function parsed(line) {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** The primary's announcement on the child's stdout (the line with a port and no log level). */
export function announcement(child, timeoutMs) {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => reject(new Error('the server did not start')), timeoutMs);
    child.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening`)));
    child.stdout.on('data', (chunk) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop();
      // Log lines share stdout; the primary's announcement is the one with a port and no log level.
      const announced = lines.map(parsed).find((record) => typeof record?.port === 'number' && record.level === undefined);
      if (announced) {
        clearTimeout(timer);
        resolve(announced);
      }
    });
  });
}

/** Polls `condition` (a throw counts as "not yet") until it holds, or fails with `message` after `timeoutMs`. */
export async function until(condition, timeoutMs, message) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // Not yet.
    }
    if (Date.now() > deadline) throw new Error(message);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}
