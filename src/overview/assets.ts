import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

/** One file of the dashboard, held in memory: a handful of small files, read once. */
export interface DashboardAsset {
  body: Buffer;
  type: string;
}

export interface DashboardAssets {
  /** The path segment of every asset URL: the package version and a digest of the files' content. */
  version: string;
  /** By path below the versioned prefix (`app.js`, `vendor/preact.js`). */
  files: ReadonlyMap<string, DashboardAsset>;
  /** The page, its asset URLs filled in. */
  page: string;
}

export const ASSET_PREFIX = '/dashboard/assets';

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The libraries the page imports, served from the installed packages at the same versioned prefix (their
 * versions are pinned in package.json). Both are single ES modules without imports of their own.
 */
const VENDOR: Record<string, (resolve: NodeJS.RequireResolve) => string> = {
  'vendor/preact.js': (resolve) => resolve('preact'),
  'vendor/htm.js': (resolve) => path.join(path.dirname(resolve('htm')), 'htm.module.js'),
};

async function filesUnder(root: string, dir = ''): Promise<string[]> {
  const entries = await readdir(path.join(root, dir), { withFileTypes: true });
  const found: string[] = [];
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const relative = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory()) found.push(...(await filesUnder(root, relative)));
    else if (TYPES[path.extname(entry.name)]) found.push(relative);
  }
  return found;
}

/**
 * Reads the dashboard's files (`<root>/index.html` and the scripts, styles and icon beside it) and the vendored
 * libraries. The versioned prefix changes whenever any byte does, so browsers may keep every asset forever.
 */
export async function loadDashboardAssets(root: string, packageVersion: string): Promise<DashboardAssets> {
  const files = new Map<string, DashboardAsset>();
  for (const relative of await filesUnder(root)) {
    files.set(relative, { body: await readFile(path.join(root, relative)), type: TYPES[path.extname(relative)]! });
  }
  const resolve = createRequire(import.meta.url).resolve;
  for (const [relative, locate] of Object.entries(VENDOR)) {
    // The source map is not shipped: its comment would send the browser's tools after a file that is not there.
    const text = (await readFile(locate(resolve), 'utf8')).replace(/\n?\/\/# sourceMappingURL=\S+\s*$/, '\n');
    files.set(relative, { body: Buffer.from(text), type: TYPES['.js']! });
  }
  const digest = createHash('sha256');
  for (const [relative, asset] of files) digest.update(relative).update('\0').update(asset.body).update('\0');
  const version = `${packageVersion.replace(/[^0-9A-Za-z.-]/g, '_')}-${digest.digest('hex').slice(0, 12)}`;
  const template = await readFile(path.join(root, 'index.html'), 'utf8');
  return { version, files, page: template.replaceAll('{{assets}}', `${ASSET_PREFIX}/${version}`) };
}
