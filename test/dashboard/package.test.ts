import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..');

t.test('the image carries the dashboard into its runtime stage', async (t) => {
  const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  const [build, runtime] = dockerfile.split(/^FROM .*$/m).slice(1);
  t.match(build, /^COPY dashboard \.\/dashboard$/m, 'the build stage copies it');
  t.match(runtime, /^COPY --from=build .*\/app\/dashboard \.\/dashboard$/m, 'the runtime stage keeps it');
  const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n').map((line) => line.trim());
  t.notOk(ignored.includes('dashboard'), 'it is in the build context');
});

t.test('the package ships the dashboard, and the libraries it serves are runtime dependencies, pinned', async (t) => {
  const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const name of ['preact', 'htm']) t.match(manifest.dependencies[name], /^\d+\.\d+\.\d+$/, `${name} is a dependency with an exact version`);
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as Array<{ files: Array<{ path: string }> }>;
  const files = new Set(packed!.files.map((file) => file.path));
  for (const file of ['dashboard/index.html', 'dashboard/app.js', 'dashboard/style.css', 'dashboard/lib/store.js', 'dashboard/views/server.js']) t.ok(files.has(file), `${file} is in the package`);
});
