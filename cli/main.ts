#!/usr/bin/env -S node --max-semi-space-size=2
import { ConfigError } from '../src/config/errors.js';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { closestMatch } from '../src/config/did-you-mean.js';
import { CliError, MAIN_USAGE } from './usage.js';

// Each command's code is loaded when it runs: a server started here holds none of the others'.
const start = async (argv: string[]) => (await import('./start.js')).start(argv);
const init = async (argv: string[]) => (await import('./init.js')).init(argv);
const keys = async (argv: string[]) => (await import('./keys.js')).keys(argv);
const orgs = async (argv: string[]) => (await import('./orgs.js')).orgs(argv);
const ctl = async (argv: string[]) => (await import('./ctl.js')).ctl(argv);
const apply = async (argv: string[]) => (await import('./apply.js')).apply(argv);
const openapi = async (argv: string[]) => (await import('./openapi.js')).openapi(argv);
const status = async (argv: string[]) => (await import('./status.js')).status(argv);
const commands: Record<string, (argv: string[]) => Promise<void>> = { start, init, orgs, keys, ctl, apply, openapi, status };

/** This package's version: the nearest package.json above this file (from the sources or from dist/). */
function version(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'fleetplane') return manifest.version ?? 'unknown';
    }
    if (path.dirname(dir) === dir) return 'unknown';
  }
}

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${MAIN_USAGE}\n`);
    if (!name) process.exitCode = 2;
    return;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(`fleetplane ${version()}\n`);
    return;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    const hint = closestMatch(name, Object.keys(commands));
    throw new CliError(`unknown command "${name}"${hint ? ` (did you mean "${hint}"?)` : ''}; see "fleetplane --help"`, 2);
  }
  await command(rest);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof CliError) {
    process.stderr.write(`fleetplane: ${error.message}\n`);
    if (error.usage) process.stderr.write(`${error.usage}\n`);
    process.exit(error.exitCode);
  }
  if (error instanceof ConfigError) {
    process.stderr.write(`fleetplane: invalid configuration: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`fleetplane: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(1);
});
