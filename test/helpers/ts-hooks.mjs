// Module hooks for the test processes: `./x.js` imported from TypeScript finds `./x.ts` when no `x.js` is there
// (as the compiler resolves it), and a `.ts` file loads as the JavaScript `transpile` makes of it.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { transpile } from './ts-transpile.mjs';

const relative = (specifier) => specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('/') || specifier.startsWith('file:');

export async function resolve(specifier, context, next) {
  if (specifier.endsWith('.js') && relative(specifier) && context.parentURL?.startsWith('file:')) {
    const url = new URL(specifier, context.parentURL);
    const file = fileURLToPath(url);
    if (!existsSync(file)) {
      const source = `${file.slice(0, -3)}.ts`;
      if (existsSync(source)) return { url: pathToFileURL(source).href, format: 'module', shortCircuit: true };
    }
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith('file:') || !new URL(url).pathname.endsWith('.ts')) return next(url, context);
  const file = fileURLToPath(url);
  return { format: 'module', source: transpile(file, readFileSync(file, 'utf8')), shortCircuit: true };
}
