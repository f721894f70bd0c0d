import { closestMatch } from '../src/config/did-you-mean.js';

/** One-line failure for the terminal, then the exit code: 2 = bad input, 1 = could not run. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 2,
    readonly usage?: string,
  ) {
    super(message);
  }
}

/** The command a usage text is for (`Usage: fleetplane keys ...` → `keys`). */
const commandOf = (usage: string) => /^Usage: fleetplane ([a-z-]+)/.exec(usage)?.[1];

/**
 * A `parseArgs` failure as one line a person can act on: an unknown option names the closest real one (taken
 * from the usage text), and every message ends with where the options are listed, instead of the parser's
 * advice about positional arguments.
 */
export function usageError(error: unknown, usage: string): CliError {
  const command = commandOf(usage);
  const help = `see "fleetplane${command ? ` ${command}` : ''} --help"`;
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const option = /'(-[^']*)'/.exec(message ?? '')?.[1] ?? '';
    const known = [...new Set(usage.match(/--[a-z][a-z-]*/g) ?? [])];
    const hint = closestMatch(option.replace(/^-+/, ''), known.map((name) => name.slice(2)));
    return new CliError(`unknown option "${option}"${hint ? ` (did you mean "--${hint}"?)` : ''}; ${help}`, 2);
  }
  const first = (message ?? String(error)).split(/\. (?=[A-Z])/)[0]!.replace(/\.$/, '');
  return new CliError(`${first.charAt(0).toLowerCase()}${first.slice(1)}; ${help}`, 2);
}

/** Runs `parse` (a `parseArgs` call), turning its errors into one-line usage errors (exit 2). */
export function withUsage<T>(usage: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw usageError(error, usage);
  }
}

/** Commands that only read: the only ones a typo is pointed to (a typo of `status` must not lead to `start`). */
const READING_COMMANDS = ['status', 'help', 'version'];

/**
 * The command to suggest for a mistyped one: the closest reading command, and only when no command that acts is
 * closer. A suggestion gets run as written, so it is never one that boots, writes or steers something.
 */
export function suggestedCommand(typed: string, commands: readonly string[]): string | undefined {
  const closest = closestMatch(typed, [...READING_COMMANDS, ...commands.filter((name) => !READING_COMMANDS.includes(name))]);
  return closest && READING_COMMANDS.includes(closest) ? closest : undefined;
}

export const MAIN_USAGE = `Usage: fleetplane <command> [options]

Commands:
  start      boot the server (primary + workers)
  init       create the first organization of a store and an admin key
  orgs       create or list organizations (tenants)
  keys       create, list or revoke keys; rotate the key that seals stored secrets
  ctl        send a control envelope to a running server
  apply      create or update apis, workflows, webhooks, servers_config, organizations from a file
  openapi    write openapi/openapi.json
  status     a table of the running server's processes: pids, states, version, uptime, memory
  upgrade    hand the running server over to a new primary from the code on disk, with no downtime

Options:
  -v, --version  print the version

Run "fleetplane <command> --help" for a command's options.`;
