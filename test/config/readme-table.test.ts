import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { scaled } from '../helpers/wait.js';

const root = path.resolve(import.meta.dirname, '..', '..');

t.test('the configuration table in docs/configuration.md matches the schema the server validates against', async (t) => {
  const generated = spawnSync(process.execPath, [path.join(root, 'scripts', 'config-table.mjs')], { encoding: 'utf8', timeout: scaled(20_000) });
  t.equal(generated.status, 0, generated.stderr);
  const readme = readFileSync(path.join(root, 'docs', 'configuration.md'), 'utf8');
  const start = readme.indexOf('<!-- config-table:start -->');
  const end = readme.indexOf('<!-- config-table:end -->');
  t.ok(start >= 0 && end > start, 'docs/configuration.md has the table markers');
  t.equal(readme.slice(start + '<!-- config-table:start -->'.length, end).trim(), generated.stdout.trim(), 'regenerate with: npm run build && node scripts/config-table.mjs --write');
});
