#!/usr/bin/env node
// The shape of the source tree, checked on every CI run:
// - no import cycle among the project's modules, type-only imports included;
// - src/ is framework-free: it never imports fastify, @fastify/*, routes/, plugins/ or schemas/;
// - no source file is longer than 400 lines;
// - nothing outside src/inventory/ names the inventory's collections (`servers`, `clusters`) by a string: it
//   uses the names, records and queries src/inventory/ exports.
// Prints each violation on one line and exits 1 when there is any.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ROOTS = ['index.ts', 'app.ts', 'primary-routes.ts', 'src', 'routes', 'plugins', 'schemas', 'cli'];
const MAX_LINES = 400;
const FRAMEWORK = /^(fastify|fastify-plugin|@fastify\/)/;
const INVENTORY_HOME = 'src/inventory/';
const INVENTORY_NAMES = new Set(['servers', 'clusters']);

function sources(path) {
  const full = join(root, path);
  if (statSync(full).isFile()) return path.endsWith('.ts') ? [path] : [];
  return readdirSync(full).flatMap((name) => sources(join(path, name)));
}

/**
 * Every module specifier of a file (static imports and exports, type-only too, and dynamic `import()`), and the
 * lines where a string literal is exactly one of the inventory's collection names.
 */
function scan(file, text) {
  const found = [];
  const inventoryNames = [];
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && INVENTORY_NAMES.has(node.text)) {
      inventoryNames.push(`${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: '${node.text}'`);
    }
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      found.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { specifiers: found, inventoryNames };
}

const files = ROOTS.flatMap(sources).sort();
const known = new Set(files);
const graph = new Map();
const problems = [];
for (const file of files) {
  const text = readFileSync(join(root, file), 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES) problems.push(`${file}: ${lines} lines (at most ${MAX_LINES})`);
  const edges = [];
  const { specifiers, inventoryNames } = scan(file, text);
  if (!file.startsWith(INVENTORY_HOME)) for (const at of inventoryNames) problems.push(`${file}:${at} names an inventory collection (use src/inventory/)`);
  for (const specifier of specifiers) {
    if (file.startsWith('src/') && FRAMEWORK.test(specifier)) problems.push(`${file}: imports ${specifier} (src/ is framework-free)`);
    if (!specifier.startsWith('.')) continue;
    const target = relative(root, resolve(root, dirname(file), specifier)).replace(/\.js$/, '.ts');
    if (file.startsWith('src/') && /^(routes|plugins|schemas)\//.test(target)) problems.push(`${file}: imports ${target} (src/ does not depend on the HTTP layer)`);
    if (known.has(target)) edges.push(target);
  }
  graph.set(file, edges);
}

// Tarjan's strongly connected components: every component of more than one module (or a self-import) is a cycle.
let index = 0;
const order = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const cycles = [];
function connect(node) {
  order.set(node, index);
  low.set(node, index++);
  stack.push(node);
  onStack.add(node);
  for (const next of graph.get(node)) {
    if (!order.has(next)) {
      connect(next);
      low.set(node, Math.min(low.get(node), low.get(next)));
    } else if (onStack.has(next)) {
      low.set(node, Math.min(low.get(node), order.get(next)));
    }
  }
  if (low.get(node) !== order.get(node)) return;
  const component = [];
  let member;
  do {
    member = stack.pop();
    onStack.delete(member);
    component.push(member);
  } while (member !== node);
  if (component.length > 1 || graph.get(node).includes(node)) cycles.push(component.sort());
}
for (const file of files) if (!order.has(file)) connect(file);
for (const cycle of cycles) problems.push(`import cycle: ${cycle.join(' ↔ ')}`);

for (const problem of problems) console.log(problem);
console.log(`${files.length} modules, ${cycles.length} import cycles, ${problems.length - cycles.length} other problems`);
process.exit(problems.length ? 1 : 0);
