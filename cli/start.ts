import { parseArgs } from 'node:util';
import cluster from 'node:cluster';
import { Fleetplane } from '../index.js';
import { loadConfig } from '../src/config/load.js';
import { ListenError } from '../src/runtime/listeners.js';
import { SecretKeyError } from '../src/secrets/errors.js';
import { secretsKeyFile } from '../src/secrets/key-file.js';
import { SecretKeyring } from '../src/secrets/keyring.js';
import { ServerRunningError } from '../src/control/socket.js';
import { StoreError } from '../src/db/errors.js';
import { CliError, usageError } from './usage.js';
import { autoInitialize } from './init.js';

export const START_USAGE = `Usage: fleetplane start [options]

Boot the server: a primary that binds the ports and supervises workers.

Options:
  --config PATH       config file (default: ./fleetplane.config.json, or FLEETPLANE_CONFIG)
  --port N            HTTP port (default 8080)
  --workers N|auto    number of workers; 0 = single process (default auto)
  --data-dir DIR      data directory (default ./data)
  -h, --help          show this help

Signals: SIGTERM/SIGINT graceful shutdown (exit 0), SIGHUP rolling restart of all workers.`;

export async function start(argv: string[]): Promise<void> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        workers: { type: 'string' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw usageError(error, START_USAGE);
  }
  if (values.help) {
    process.stdout.write(`${START_USAGE}\n`);
    return;
  }
  const flags = {
    config: values.config as string | undefined,
    port: values.port as string | undefined,
    workers: values.workers as string | undefined,
    dataDir: values['data-dir'] as string | undefined,
  };
  // Workers take the primary's resolved config; only the primary reads files, env and flags.
  const loaded = cluster.isWorker ? undefined : loadConfig({ flags });
  try {
    // A bad secrets key is refused before anything is created: bad input changes nothing.
    if (loaded) SecretKeyring.fromEnvironment(secretsKeyFile(loaded.config));
    await Fleetplane.init(loaded, { flags });
    // Only once the server runs (ports bound, no other server on this data directory): a start that fails
    // creates no organization and no key that nobody would ever see.
    if (loaded) await autoInitialize(loaded.config);
  } catch (error) {
    if (error instanceof ListenError || error instanceof ServerRunningError) throw new CliError(error.message, 1);
    if (error instanceof SecretKeyError) throw new CliError(error.message, error.source === 'env' ? 2 : 1);
    // A store that refuses this server (wrong credentials, a missing database, too old, no rights) is one line
    // naming the problem: retrying cannot fix it, and a stack trace would hide the reason.
    if (error instanceof StoreError) throw new CliError(error.message, 1);
    throw error;
  }
}
