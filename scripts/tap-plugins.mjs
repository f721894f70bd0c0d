// Before the tests: tap is built with the plugins package.json names (TypeScript is loaded by tsx, not by tap's
// ts-node plugin). After a fresh install tap still holds its default build, and the first run would rebuild it
// only after it had started its test files with the default loaders: rebuild it first, once.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.join(import.meta.dirname, '..');
const built = readFileSync(path.join(root, 'node_modules', '@tapjs', 'test', 'test-built', 'dist', 'esm', 'index.js'), 'utf8');
if (built.includes('"@tapjs/typescript/import"')) {
  process.stderr.write('tap: building it with the configured plugins (once after an install)\n');
  const rebuilt = spawnSync(path.join(root, 'node_modules', '.bin', 'tap'), ['build'], { stdio: 'inherit' });
  if (rebuilt.status !== 0) process.exit(rebuilt.status ?? 1);
}
