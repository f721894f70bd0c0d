// Turns the TypeScript of the tests and the sources they import into JavaScript, once per content: the result is
// kept under node_modules/.cache, so a test file's process reads JavaScript instead of loading a compiler. Types
// are only removed here (each file alone); `npm run lint` is what checks them.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CACHE = path.join(ROOT, 'node_modules', '.cache', 'fleetplane-test-js');
const require = createRequire(import.meta.url);
// Part of every key: a new compiler or a change to this file's options makes new entries.
const SALT = `${require('typescript/package.json').version} es2022 esnext inline-map 1`;

let typescript;
function compiler() {
  typescript ??= require('typescript');
  return typescript;
}

const entry = (file, source) => path.join(CACHE, `${createHash('sha256').update(SALT).update('\0').update(file).update('\0').update(source).digest('hex')}.js`);

/** The JavaScript of one TypeScript file, from the cache when its content was seen before. */
export function transpile(file, source = readFileSync(file, 'utf8')) {
  const cached = entry(file, source);
  try {
    return readFileSync(cached, 'utf8');
  } catch {
    // not seen yet
  }
  const ts = compiler();
  const output = ts.transpileModule(source, {
    fileName: file,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      esModuleInterop: true,
      inlineSourceMap: true,
      inlineSources: true,
    },
  }).outputText;
  mkdirSync(CACHE, { recursive: true });
  // Written aside, then renamed: a process reading the entry sees all of it or none.
  const aside = `${cached}.${process.pid}`;
  writeFileSync(aside, output);
  renameSync(aside, cached);
  return output;
}

const SOURCES = ['index.ts', 'app.ts', 'primary-routes.ts', 'src', 'routes', 'plugins', 'schemas', 'cli', 'test'];

/**
 * Transpiles every `.ts` file of the sources and the tests (declarations aside) and drops the cache's entries of
 * contents no file has any more; returns how many files there are.
 */
export function transpileAll() {
  const current = new Set();
  for (const source of SOURCES) {
    const start = path.join(ROOT, source);
    const files = source.endsWith('.ts') ? [start] : readdirSync(start, { recursive: true }).map((name) => path.join(start, name));
    for (const file of files) {
      if (!file.endsWith('.ts') || file.endsWith('.d.ts')) continue;
      const text = readFileSync(file, 'utf8');
      transpile(file, text);
      current.add(path.basename(entry(file, text)));
    }
  }
  for (const name of readdirSync(CACHE)) if (name.endsWith('.js') && !current.has(name)) rmSync(path.join(CACHE, name), { force: true });
  return current.size;
}
