#!/usr/bin/env -S node --max-semi-space-size=2
import { ConfigError } from '../src/config/errors.js';
import { FLEETPLANE_VERSION } from '../src/version.js';
import { CliError, MAIN_USAGE, suggestedCommand } from './usage.js';

// Each command's code is loaded when it runs: a server started here holds none of the others'.
const start = async (argv: string[]) => (await import('./start.js')).start(argv);
const init = async (argv: string[]) => (await import('./init.js')).init(argv);
const keys = async (argv: string[]) => (await import('./keys.js')).keys(argv);
const orgs = async (argv: string[]) => (await import('./orgs.js')).orgs(argv);
const ctl = async (argv: string[]) => (await import('./ctl.js')).ctl(argv);
const apply = async (argv: string[]) => (await import('./apply.js')).apply(argv);
const openapi = async (argv: string[]) => (await import('./openapi.js')).openapi(argv);
const status = async (argv: string[]) => (await import('./status.js')).status(argv);
const upgrade = async (argv: string[]) => (await import('./upgrade.js')).upgrade(argv);
const commands: Record<string, (argv: string[]) => Promise<void>> = { start, init, orgs, keys, ctl, apply, openapi, status, upgrade };

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${MAIN_USAGE}\n`);
    if (!name) process.exitCode = 2;
    return;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(`fleetplane ${FLEETPLANE_VERSION}\n`);
    return;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    const hint = suggestedCommand(name, Object.keys(commands));
    throw new CliError(`unknown command "${name}"${hint ? ` (did you mean "${hint}"?)` : ''}; see "fleetplane --help"`, 2);
  }
  await command(rest);
}

main(process.argv.slice(2)).catch(async (error: unknown) => {
  let line: string;
  let code: number;
  if (error instanceof CliError) {
    line = error.message;
    code = error.exitCode;
  } else if (error instanceof ConfigError) {
    line = `invalid configuration: ${error.message}`;
    code = 2;
  } else {
    line = (error as Error)?.stack ?? String(error);
    code = 1;
  }
  process.stderr.write(`fleetplane: ${line}\n`);
  if (error instanceof CliError && error.usage) process.stderr.write(`${error.usage}\n`);
  // A primary started by a hand-over that fails this early tells the old one why (it keeps serving).
  const { reportHandoverFailure } = await import('../src/runtime/handover-successor.js');
  await reportHandoverFailure(line.split('\n')[0]!);
  process.exit(code);
});
