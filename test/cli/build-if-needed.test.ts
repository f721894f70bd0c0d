import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './fixtures/cli.js';

const SCRIPT = path.resolve(import.meta.dirname, '..', '..', 'scripts', 'build-if-needed.mjs');

/** A project whose "compiler" only writes dist/cli/main.js, so the script's own behaviour is what runs. */
function project(): string {
  const root = tempDir();
  mkdirSync(path.join(root, 'scripts'));
  cpSync(SCRIPT, path.join(root, 'scripts', 'build-if-needed.mjs'));
  for (const dir of ['src', 'cli']) mkdirSync(path.join(root, dir));
  for (const file of ['index.ts', 'app.ts', 'tsconfig.json', 'src/a.ts']) writeFileSync(path.join(root, file), '');
  mkdirSync(path.join(root, 'node_modules', 'typescript', 'bin'), { recursive: true });
  writeFileSync(
    path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
    "const fs = require('node:fs'); const path = require('node:path'); const out = path.join(process.cwd(), 'dist', 'cli'); fs.mkdirSync(out, { recursive: true }); fs.writeFileSync(path.join(out, 'main.js'), ''); console.log('tsc ran');",
  );
  writeFileSync(path.join(root, 'node_modules', 'typescript', 'package.json'), '{"type":"commonjs"}');
  return root;
}

const run = (root: string) => spawnSync(process.execPath, [path.join(root, 'scripts', 'build-if-needed.mjs')], { cwd: root, encoding: 'utf8', timeout: 60_000 });

t.test('the first start says it builds and how long it took; an up-to-date build says nothing; changed sources say so', async (t) => {
  const root = project();
  const first = run(root);
  t.equal(first.status, 0, first.stderr);
  t.match(first.stderr, /^building Fleetplane \(first start only\)…\nbuilt in \d+\.\d s\n$/, 'one line before the build, one with its duration');
  t.match(first.stdout, /tsc ran/);

  const again = run(root);
  t.equal(again.status, 0);
  t.equal(again.stderr, '', 'nothing to build: nothing said');
  t.notMatch(again.stdout, /tsc ran/);

  const later = new Date(Date.now() + 60_000);
  utimesSync(path.join(root, 'src', 'a.ts'), later, later);
  const changed = run(root);
  t.match(changed.stderr, /^building Fleetplane \(the sources changed\)…\nbuilt in \d+\.\d s\n$/);
});
