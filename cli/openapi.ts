import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../app.js';
import type { RouteContext } from '../plugins/services.js';
import { loadConfig } from '../src/config/load.js';
import { withUsage } from './init.js';
import { CliError } from './usage.js';

export const OPENAPI_FILE = path.join('openapi', 'openapi.json');

export const OPENAPI_USAGE = `Usage: fleetplane openapi [--out PATH] [--check]

Write the OpenAPI document of the HTTP surface, generated from the route schemas.

Options:
  --out PATH          where to write (default ${OPENAPI_FILE})
  --check             regenerate to a temporary file and fail when PATH differs from it
  -h, --help          show this help`;

/**
 * The document every worker serves at `/openapi.json`, from an app built over a stand-in server with the
 * default configuration (plus `settings`, for tests): nothing listens, nothing is opened, and nothing
 * machine-specific gets in.
 */
export async function generateOpenApi(settings: Record<string, unknown> = {}): Promise<string> {
  const config = loadConfig({ env: {}, object: { dataDir: path.join(tmpdir(), 'fleetplane-openapi'), ...settings } }).config;
  const nothingRouted = () => Promise.reject(new Error('the OpenAPI export routes no envelopes'));
  const server: RouteContext = {
    id: 'openapi',
    workerId: 0,
    config,
    status: 'stopped',
    state: { shedding: new Set(), isShed: () => false },
    getHealth: () => ({ ready: false, live: true, status: 'stopped' }),
    metricsText: async () => '',
    send: nothingRouted,
    request: nothingRouted,
  };
  const { app } = await buildApp({ server, logger: false });
  try {
    return `${JSON.stringify(app.swagger(), null, 2)}\n`;
  } finally {
    await app.close();
  }
}

/** `out` is where the command prints (stdout; tests pass their own stream). */
export async function openapi(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const options = { out: { type: 'string' }, check: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;
  const { values } = withUsage(OPENAPI_USAGE, () => parseArgs({ args: argv, options, strict: true }));
  if (values.help) {
    out.write(`${OPENAPI_USAGE}\n`);
    return;
  }
  const target = path.resolve(values.out ?? OPENAPI_FILE);
  const document = await generateOpenApi();
  if (values.check) {
    const scratch = mkdtempSync(path.join(tmpdir(), 'fleetplane-openapi-'));
    try {
      const fresh = path.join(scratch, 'openapi.json');
      writeFileSync(fresh, document);
      let committed: string | undefined;
      try {
        committed = readFileSync(target, 'utf8');
      } catch {
        throw new CliError(`${target} does not exist; run "npm run openapi" and commit it`, 1);
      }
      if (committed !== readFileSync(fresh, 'utf8')) throw new CliError(`${target} is stale: it differs from the routes' schemas; run "npm run openapi" and commit it`, 1);
      out.write(`${target} is up to date\n`);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    return;
  }
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, document);
  out.write(`wrote ${target}\n`);
}
