#!/usr/bin/env node
import { ConfigError } from '../src/config/errors.js';
import { CliError, MAIN_USAGE } from './usage.js';
import { start } from './start.js';
import { init } from './init.js';
import { keys } from './keys.js';
import { ctl } from './ctl.js';
import { apply } from './apply.js';

// openapi builds the whole app: loaded only when asked for, so the other commands start as fast as before.
const openapi = async (argv: string[]) => (await import('./openapi.js')).openapi(argv);
const commands: Record<string, (argv: string[]) => Promise<void>> = { start, init, keys, ctl, apply, openapi };

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${MAIN_USAGE}\n`);
    if (!name) process.exitCode = 2;
    return;
  }
  const command = commands[name];
  if (!command) throw new CliError(`unknown command "${name}"`, 2, MAIN_USAGE);
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
