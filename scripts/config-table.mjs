// Prints the configuration reference (every field, its default, its environment variable) as a markdown
// table, from the same schema the server validates against. `node scripts/config-table.mjs --write`
// replaces the table between the markers in docs/configuration.md (test/config/readme-table.test.ts checks it).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigSchema, leafPaths } from '../dist/src/config/schema.js';
import { ENV_VARIABLES } from '../dist/src/config/load.js';

const root = path.resolve(import.meta.dirname, '..');
const envFor = new Map([...ENV_VARIABLES].filter(([name]) => name !== 'FLEETPLANE_WORKERS').map(([name, leaf]) => [leaf, name]));

function schemaAt(leaf) {
  let schema = ConfigSchema;
  for (const part of leaf.split('.')) schema = schema.properties[part];
  return schema;
}

const cell = (value) => String(value).replaceAll('|', '\\|');
const rows = leafPaths().map((leaf) => {
  const schema = schemaAt(leaf);
  const fallback = schema.default === undefined ? '—' : `\`${JSON.stringify(schema.default)}\``;
  const env = leaf === 'workers.count' ? '`FLEETPLANE_WORKERS`, `WEB_CONCURRENCY` (auto)' : `\`${envFor.get(leaf)}\``;
  return `| \`${leaf}\` | ${cell(fallback)} | ${env} | ${cell(schema.description ?? '')} |`;
});
const table = ['| field | default | environment | meaning |', '|---|---|---|---|', ...rows].join('\n');

if (process.argv.includes('--write')) {
  const file = path.join(root, 'docs', 'configuration.md');
  const readme = readFileSync(file, 'utf8');
  const start = '<!-- config-table:start -->';
  const end = '<!-- config-table:end -->';
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < 0) throw new Error('docs/configuration.md has no config-table markers');
  writeFileSync(file, `${readme.slice(0, from + start.length)}\n${table}\n${readme.slice(to)}`);
} else {
  process.stdout.write(`${table}\n`);
}
