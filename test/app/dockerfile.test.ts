import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..');

t.test("the image's build stage copies every source root that tsconfig.json compiles", async (t) => {
  const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  const copied = new Set(
    dockerfile
      .split('\n')
      .filter((line) => /^COPY (?!--from)/.test(line))
      .flatMap((line) => line.replace(/^COPY /, '').trim().split(/\s+/).slice(0, -1))
      .map((source) => source.replace(/\/$/, '')),
  );
  const { include } = JSON.parse(readFileSync(path.join(root, 'tsconfig.json'), 'utf8')) as { include: string[] };
  const roots = new Set(include.map((pattern) => pattern.split('/')[0]!));
  t.ok(roots.size > 0);
  for (const source of roots) t.ok(copied.has(source), `${source} is copied before \`npm run build\``);
  t.ok(copied.has('tsconfig.json'));
});
