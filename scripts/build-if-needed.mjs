// `npm start` builds first when dist/ is missing or older than a source file.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const output = path.join(root, 'dist', 'cli', 'main.js');

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

const sources = ['src', 'routes', 'plugins', 'schemas', 'cli'].map((dir) => path.join(root, dir)).filter(existsSync);
const newest = Math.max(...sources.map(newestSource), ...['index.ts', 'app.ts', 'tsconfig.json'].map((file) => statSync(path.join(root, file)).mtimeMs));
if (!existsSync(output) || statSync(output).mtimeMs < newest) {
  execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.json')], { stdio: 'inherit' });
}
