import t from 'tap';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { ConfigSchema, leafPaths } from '../../src/config/schema.js';
import { ENV_VARIABLES } from '../../src/config/load.js';
import { CRUD_METHODS } from '../../src/crud/envelope.js';
import { MANAGER_METHODS } from '../../src/manager/envelope.js';
import { COLLECTION_SCHEMAS } from '../../src/db/documents.js';

/**
 * docs/from-the-design.md maps every name of the design documents to Fleetplane's. These tests keep its
 * Fleetplane side true: each name it gives is checked against the code it names (the config schema, the
 * registered control methods, the typed events and their payloads, the server object, the CLI, the files).
 */
const root = path.resolve(import.meta.dirname, '..', '..');
const PAGE_FILE = path.join(root, 'docs', 'from-the-design.md');
const page = existsSync(PAGE_FILE) ? readFileSync(PAGE_FILE, 'utf8') : '';
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

function sourcesUnder(dir: string): string[] {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.join(dir, file));
}
const CODE_FILES = ['index.ts', 'app.ts', ...['src', 'routes', 'plugins', 'schemas', 'cli'].flatMap(sourcesUnder)];
const code = CODE_FILES.map(read).join('\n');
/** Where a name may be found: the code, the README and the other reference pages. */
const documented = [code, read('README.md'), read('package.json'), ...readdirSync(path.join(root, 'docs')).filter((file) => file.endsWith('.md') && file !== 'from-the-design.md').map((file) => read(`docs/${file}`))].join('\n');

// ---- The page's tables: `| design | Fleetplane | why / how it differs |`, one per section.
const HEADER = '| design | Fleetplane | why / how it differs |';
interface Row { section: string; cells: [string, string, string]; line: number }
const rows: Row[] = [];
const sectionsWithTable = new Map<string, number>();
{
  const lines = page.split('\n');
  let section = '';
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    if (/^#{2,3} /.test(line)) section = line.replace(/^#+ /, '');
    if (line !== HEADER) continue;
    sectionsWithTable.set(section, (sectionsWithTable.get(section) ?? 0) + 1);
    for (index += 2; index < lines.length && lines[index]!.startsWith('|'); index++) {
      const cells = lines[index]!.slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim().replaceAll('\\|', '|'));
      rows.push({ section, cells: cells as Row['cells'], line: index + 1 });
    }
  }
}
const spans = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
/** The design's own names: what the first column writes, which need not exist here. */
const designNames = new Set(rows.flatMap((row) => spans(row.cells[0])));
/** Text that speaks of Fleetplane: the Fleetplane column always, the rest of the page outside the design column. */
const fleetplaneText = [...rows.map((row) => row.cells[1]), ...rows.map((row) => row.cells[2]), page.split('\n').filter((line) => !line.startsWith('|')).join('\n')];
const fleetplaneNames = [...new Set([...rows.flatMap((row) => spans(row.cells[1])), ...fleetplaneText.slice(rows.length).flatMap(spans).filter((name) => !designNames.has(name))])];
/** Names the page introduces with a word: "method `x`, `y` and `z`", "collection `x`", "frame `x`", "event `x`". */
function introduced(word: string): string[] {
  const found: string[] = [];
  for (const text of fleetplaneText) {
    for (const match of text.matchAll(new RegExp(`\\b${word}s? ((?:\`[^\`]+\`(?:,? (?:and|or) |, | / )?)+)`, 'g'))) found.push(...spans(match[1]!));
  }
  return [...new Set(found)];
}

// ---- What the code declares.
const LEAVES = new Set(leafPaths());
const SECTIONS = new Set(Object.keys((ConfigSchema as TSchema & { properties: object }).properties));
const isConfigSection = (name: string) => [...LEAVES].some((leaf) => leaf.startsWith(`${name}.`));

/** Control methods: every `handle('x', …)` (or `handle(CONSTANT, …)`) in the code, the CRUD and manager methods. */
const METHODS = new Set<string>([...CRUD_METHODS, ...MANAGER_METHODS]);
for (const [, literal, constant] of code.matchAll(/\bhandle\??\.?\(\s*(?:'([A-Za-z][\w.:-]*)'|([A-Z][A-Z_]+)\s*,)/g)) {
  if (literal) METHODS.add(literal);
  else for (const [, value] of code.matchAll(new RegExp(`\\bconst ${constant} = '([^']+)'`, 'g'))) METHODS.add(value!);
}
for (const [, method] of code.matchAll(/method (?:===|:) '([a-z][\w.]*)'/g)) if (/^(socket|overview)\./.test(method!)) METHODS.add(method!);
const isMethod = (name: string) => METHODS.has(name) || (name.startsWith('workflow.') && code.includes('`workflow.${'));

/** The typed events of the server object with their payload fields (`src/runtime/events.ts`). */
const EVENTS = new Map<string, Set<string>>();
{
  const source = read('src/runtime/events.ts');
  const body = source.slice(source.indexOf('export interface ServerEvents {'), source.indexOf('\n}', source.indexOf('export interface ServerEvents {')));
  for (const [, name, fields] of body.matchAll(/^\s*'?([\w:.-]+)'?: \{([^}]*)\};/gm)) EVENTS.set(name!, new Set([...fields!.matchAll(/(\w+)\??:/g)].map((field) => field[1]!)));
}
const STORAGE_EVENTS = new Set(['clear', 'change:<key>', 'delete:<key>']);

/** Where the members of `server.<x>` are declared. */
const MEMBER_FILES: Record<string, string[]> = {
  '': ['src/server.ts', 'src/runtime/events.ts'],
  state: ['src/state/state.ts'],
  storage: ['src/storage/cluster-storage.ts', 'src/events/safe-emitter.ts'],
  store: ['src/storage/cluster-storage.ts', 'src/events/safe-emitter.ts'],
  manager: ['src/manager/manager.ts'],
  mesh: ['src/mesh/api.ts'],
  repository: ['src/repositories/service.ts'],
  authorize: ['src/auth/authorize.ts'],
  api: ['src/api/service.ts'],
  workflow: ['src/workflows/service.ts'],
  webhooks: ['src/webhooks/service.ts'],
};
const declares = (files: string[], member: string) =>
  files.some((file) => new RegExp(`^\\s*(?:(?:readonly|declare|get|async|abstract|override|static)\\s+)*${member}\\s*[(:<?]`, 'm').test(read(file)));
const FLEETPLANE_CALLS = new Set([...read('index.ts').slice(read('index.ts').indexOf('export const Fleetplane = {')).matchAll(/^ {2}(\w+)\(/gm)].map((match) => match[1]!));
const COMMANDS = new Set(read('cli/main.ts').match(/^const commands\b.*= \{([^}]*)\}/m)![1]!.split(',').map((name) => name.trim()));
const CTL_SUBCOMMANDS = new Set([...read('cli/ctl.ts').matchAll(/argv\[0\] !== '(\w+)'/g)].map((match) => match[1]!));
const FRAMES = new Set([...read('src/mesh/frames.ts').matchAll(/^ {2}'?([\w.]+)'?: Type\.Object/gm)].map((match) => match[1]!));
const SCRIPTS = new Set(Object.keys((JSON.parse(read('package.json')) as { scripts: object }).scripts));

t.test('the page exists, is linked from the README and covers every section of the design documents', async (t) => {
  t.ok(existsSync(PAGE_FILE), 'docs/from-the-design.md exists');
  t.ok(read('README.md').includes('](docs/from-the-design.md)'), 'the README links to it (Reference pages)');
  const SECTIONS_OF_THE_DESIGN = [
    'Architectural overview', 'Core server modules', 'Component mesh architecture', 'built-in server manager',
    'HTTP API and workflow requests', 'Node API key initialization', 'Node routing workflows', 'Instance properties',
    'Ingress and connection controls', 'Process and OS lifecycle', 'IPC transport engine', 'Reactive cluster storage',
    'Distributed cluster orchestration', 'Targeting matrix', 'reconnection', 'tenant eviction', 'Security-hardened design',
    'Installation', 'Cluster repositories', 'Platform organization activation', 'Mesh peer connection',
    'Managed node startup confirmation', 'Accepted termination', 'scale-to-zero',
    // the orchestrator's README, then its contributor notes
    'quick start', 'Capabilities', 'Worker count', 'Configuration options', 'Migration to 2.0', 'Runtime API',
    'Lifecycle and shutdown', 'Circuit breaker', 'Typed events', 'Fleet health', 'Plugins',
    'Packages and plugins', 'Architecture notes', 'Commands and testing',
  ];
  for (const name of SECTIONS_OF_THE_DESIGN) {
    const section = [...sectionsWithTable.keys()].find((heading) => heading.toLowerCase().includes(name.toLowerCase()));
    t.ok(section, `a section with a table for the design's "${name}"`);
  }
  for (const [section, tables] of sectionsWithTable) t.equal(tables, 1, `"${section}" has one table`);
  t.ok(rows.length > 250, `the tables map the design's names (${rows.length} rows)`);
  for (const row of rows) {
    t.equal(row.cells.length, 3, `line ${row.line}: three cells`);
    t.ok(row.cells.every((cell) => cell.length > 0), `line ${row.line}: no cell is empty (a difference is always explained)`);
  }
});

t.test('the names asked about most are mapped, each to its Fleetplane name', async (t) => {
  const mapped = (design: string, fleetplane: string, why?: RegExp) => {
    const row = rows.find((candidate) => candidate.cells[0].includes(design) && candidate.cells[1].includes(fleetplane));
    t.ok(row, `${design} → ${fleetplane}`);
    if (row && why) t.match(row.cells[2], why, `${design}: ${why}`);
  };
  mapped('`@cocreate/cluster`', '`fleetplane`');
  mapped('CoCreateServer.init()', 'Fleetplane.init(');
  mapped('`server.routes`', 'the `routes` option');
  mapped('`workerId` and `serverId`', '`meta.origin` `{ server, worker }`');
  mapped('`{ method: "restart", server, master: true }`', '"method": "restart"');
  mapped('`{ method: "reboot", server, master: true }`', '"confirm": "<server id>"', /lifecycle\.hostControl/);
  mapped('`{ method: "shutdown", server, master: true }`', '"confirm": "<server id>"');
  mapped('`server.state.reboot()`', 'reboot(confirm)', /lifecycle\.hostControl/);
  mapped('`createServer(cluster, deployment)`', 'createServer({ cluster');
  mapped('`type: "key"`', 'collection `servers_config`');
  mapped('`server.projectRoot`', '`repositories.projectRoot`');
  mapped('`/.cocreate/repositories/`', '`repositories.stateDir`');
  mapped('`new Orchestrator(', 'Fleetplane.init(');
  mapped('`orchestrator.run(', 'the `routes` option');
  mapped('`orchestrator.registerOnShutdown(cb)`', '`server.onShutdown(hook)`');
  mapped('`orchestrator.getFleetHealth()`', '`await server.getFleetHealth()`', /async/i);
  mapped('`ClusterKitConfigWarning`', '`ConfigError`', /stops the start/);
  for (const event of [...EVENTS.keys()].filter((name) => /^(worker|fleet|restart|shutdown|circuit-breaker):/.test(name) && name !== 'worker:ready')) {
    mapped(`\`${event}\``, `\`${event}\``);
  }
});

t.test('every configuration field the page names exists in the config schema', async (t) => {
  const seen: string[] = [];
  for (const raw of fleetplaneNames) {
    const name = raw.replace(/\[[^\]]*\]$/, '');
    if (!/^[a-z][A-Za-z]*(\.[A-Za-z]+)+(\.\*)?$/.test(name) || !SECTIONS.has(name.split('.')[0]!)) continue;
    if (isMethod(name) || FRAMES.has(name)) continue;
    if (name.startsWith('server.') && !LEAVES.has(name)) continue; // a member of the server object (checked below)
    seen.push(name);
    const known = LEAVES.has(name) || isConfigSection(name) || (name.endsWith('.*') && isConfigSection(name.slice(0, -2)));
    t.ok(known, `\`${name}\` is a configuration field`);
  }
  t.ok(seen.length > 60, `configuration fields checked (${seen.length})`);
  for (const name of fleetplaneNames.filter((candidate) => /^FLEETPLANE_[A-Z_]+$|^SERVER_REPOSITORY_[A-Z_]+$/.test(candidate))) {
    t.ok(ENV_VARIABLES.has(name) || code.includes(`'${name}'`), `${name} is an environment variable Fleetplane reads or sets`);
  }
});

t.test('every control method, event, collection and mesh frame the page names exists in the code', async (t) => {
  const methods = [
    ...introduced('method'),
    ...fleetplaneNames.flatMap((name) => [...name.matchAll(/"method": "([^"]+)"/g)].map((match) => match[1]!)),
  ];
  t.ok(methods.length > 15, `methods named (${methods.length})`);
  for (const method of new Set(methods)) t.ok(isMethod(method), `method ${method} is registered (server.handle, a route's methods)`);

  for (const event of introduced('event')) t.ok(EVENTS.has(event) || STORAGE_EVENTS.has(event), `event ${event} is emitted`);
  let payloads = 0;
  for (const text of fleetplaneText.slice(0, rows.length)) {
    for (const [, name, fields] of text.matchAll(/`([\w:.-]+)` `\{([^}]*)\}`/g)) {
      if (!EVENTS.has(name!)) continue;
      payloads++;
      const written = fields!.split(',').map((field) => field.trim().replace(/\?$/, '')).sort();
      t.same(written, [...EVENTS.get(name!)!].sort(), `${name}'s payload is { ${[...EVENTS.get(name!)!].join(', ')} }`);
    }
  }
  t.ok(payloads >= 20, `event payloads checked (${payloads})`);
  for (const name of fleetplaneNames.filter((candidate) => /^[a-z-]+:[a-z-]+$/.test(candidate) && !candidate.startsWith('node:'))) t.ok(EVENTS.has(name), `${name} is a typed event`);

  for (const collection of introduced('collection')) t.ok(Object.hasOwn(COLLECTION_SCHEMAS, collection), `collection ${collection} exists`);
  for (const frame of introduced('frame')) t.ok(FRAMES.has(frame), `mesh frame ${frame} exists`);
});

t.test('every call of the server object, of Fleetplane and of the command line the page names exists', async (t) => {
  let calls = 0;
  for (const name of fleetplaneNames) {
    const call = name.replace(/^await /, '');
    const member = call.match(/^server\.(\w+)(?:\.(\w+))?/);
    if (member && !LEAVES.has(call)) {
      calls++;
      const [, first, second] = member;
      t.ok(declares(MEMBER_FILES['']!, first!), `server.${first} is a member of the server object`);
      if (second && MEMBER_FILES[first!]) t.ok(declares(MEMBER_FILES[first!]!, second), `server.${first}.${second} exists`);
    }
    const fleetplane = call.match(/^Fleetplane\.(\w+)/);
    if (fleetplane) t.ok(FLEETPLANE_CALLS.has(fleetplane[1]!), `Fleetplane.${fleetplane[1]} exists`);
    const cli = call.match(/^fleetplane (\w+)(?: ([\w.<]+))?/);
    if (cli) {
      t.ok(COMMANDS.has(cli[1]!), `fleetplane ${cli[1]} is a command`);
      if (cli[1] === 'ctl' && cli[2] && !cli[2].startsWith('<')) t.ok(CTL_SUBCOMMANDS.has(cli[2]) || isMethod(cli[2]), `fleetplane ctl ${cli[2]} is a control method`);
    }
    const npm = call.match(/^npm run (\w+)/);
    if (npm) t.ok(SCRIPTS.has(npm[1]!), `npm run ${npm[1]} is a script`);
  }
  t.ok(calls > 50, `server calls checked (${calls})`);
});

t.test('every file the page names exists, every link resolves, and every other name is found in the code or the docs', async (t) => {
  for (const name of fleetplaneNames.flatMap((candidate) => candidate.split(' '))) {
    if (!/^(src|routes|cli|plugins|schemas|test|docs|examples|bench|scripts|\.ci)\/|^[\w-]+\.(ts|json)$/.test(name)) continue;
    t.ok(existsSync(path.join(root, name)) && (name.endsWith('/') ? statSync(path.join(root, name)).isDirectory() : true), `${name} exists`);
  }
  const anchor = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replaceAll(' ', '-');
  const headings = (text: string) => text.replace(/```[\s\S]*?```/g, '').match(/^#{1,4} .+$/gm)?.map((line) => anchor(line.replace(/^#+ /, ''))) ?? [];
  for (const [, target] of page.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/.test(target!)) continue;
    const [where, fragment] = target!.split('#') as [string, string | undefined];
    const linked = where ? path.resolve(path.dirname(PAGE_FILE), where) : PAGE_FILE;
    t.ok(existsSync(linked), `${target} exists`);
    if (fragment && existsSync(linked)) t.ok(headings(readFileSync(linked, 'utf8')).includes(fragment), `#${fragment} is a heading of ${where || 'the page'}`);
  }
  // Server members, files and commands are checked above against their declarations.
  const words = fleetplaneNames.filter((name) => !/^(server|Fleetplane)\.|\.(ts|json)$/.test(name)).flatMap((name) => (/^[A-Za-z][\w-]*(\.[A-Za-z][\w-]*)*$/.test(name) ? [name] : [...name.matchAll(/[{,]\s*([A-Za-z_]\w*)\??(?=\s*[,:}])/g)].map((match) => match[1]!)));
  for (const word of new Set(words)) t.ok(documented.includes(word), `${word} is found in the code or the docs`);
});
