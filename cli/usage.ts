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

export const MAIN_USAGE = `Usage: fleetplane <command> [options]

Commands:
  start      boot the server (primary + workers)
  init       create the first organization and an admin key
  keys       create, list or revoke keys; rotate the key that seals stored secrets
  ctl        send a control envelope to a running server
  apply      create or update apis, workflows, webhooks, servers_config, organizations from a file
  openapi    write openapi/openapi.json

Run "fleetplane <command> --help" for a command's options.`;
