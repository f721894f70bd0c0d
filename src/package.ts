import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface PackageFacts {
  /** The folder that holds fleetplane's package.json. */
  root: string;
  version: string;
  license?: string;
}

let found: PackageFacts | null | undefined;

/**
 * This package's folder, version and license: the nearest package.json named fleetplane above this file, so
 * the answer is the same run from the sources or from dist/. Undefined when none is found (a copied file).
 */
export function packageFacts(): PackageFacts | undefined {
  if (found !== undefined) return found ?? undefined;
  found = null;
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string; license?: string };
      if (manifest.name === 'fleetplane') {
        found = { root: dir, version: manifest.version ?? 'unknown', ...(manifest.license ? { license: manifest.license } : {}) };
        break;
      }
    } catch {
      // not here: go up
    }
  }
  return found ?? undefined;
}
