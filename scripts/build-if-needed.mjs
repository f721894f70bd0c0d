// `npm start` builds first when dist/ is missing or older than a source file, saying so: the first build takes
// tens of seconds, and a start that prints nothing for that long looks stuck.
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
  const first = !existsSync(output);
  const started = process.hrtime.bigint();
  process.stderr.write(first ? 'building Fleetplane (first start only)…\n' : 'building Fleetplane (the sources changed)…\n');
  execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.json')], { stdio: 'inherit' });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  process.stderr.write(`built in ${seconds.toFixed(1)} s\n`);
}
