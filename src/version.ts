import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * This package's version: the nearest `package.json` named `fleetplane` above this file, from the sources or
 * from dist/. Read once, when the process loads its code: a process reports the version it runs even after a
 * newer one was deployed beside it (which is what a hand-over then starts).
 */
export const FLEETPLANE_VERSION: string = readVersion(path.dirname(fileURLToPath(import.meta.url)));

function readVersion(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (manifest.name === 'fleetplane') return manifest.version ?? 'unknown';
      } catch {
        // not a manifest we can read: keep looking above
      }
    }
    if (path.dirname(dir) === dir) return 'unknown';
  }
}
