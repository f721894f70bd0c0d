import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Type, type Static } from '@sinclair/typebox';
import { lazyCheck } from '../schema/lazy-check.js';
import type { ApiReply } from '../api/service.js';
import { schemaViolation } from '../api/schema-violation.js';
import type { BuiltinProvider } from './builtin-providers.js';

const Id = Type.String({ pattern: '^[A-Za-z0-9._-]{1,128}$' });
const CreateData = Type.Object(
  {
    server_id: Id,
    cluster_id: Id,
    deployment: Type.Optional(
      Type.Object(
        {
          workers: Type.Optional(Type.Integer({ minimum: 0, maximum: 16 })),
          logLevel: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug'].map((level) => Type.Literal(level)))),
        },
        { additionalProperties: true },
      ),
    ),
    startup: Type.Object(
      {
        server: Type.Object({ organization: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: true }),
        // A managed server's parent connection; absent for a server of a cluster no parent manages.
        manager: Type.Optional(Type.Object({ organizationId: Type.String({ minLength: 1 }), host: Type.String({ minLength: 1 }), apiKey: Type.String({ minLength: 1 }) })),
        mesh: Type.Optional(Type.Object({ secret: Type.String({ minLength: 16 }) })),
        db: Type.Optional(Type.Object({ path: Type.String({ minLength: 1 }) })),
        postgres: Type.Optional(Type.Object({ url: Type.String({ minLength: 1 }) })),
        mongodb: Type.Optional(Type.Object({ url: Type.String({ minLength: 1 }), database: Type.Optional(Type.String({ minLength: 1 })) })),
        // The autoscaler settings of the server that asked (an unmanaged cluster's deciding server).
        autoscaler: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);
type CreateData = Static<typeof CreateData>;
const createCheck = lazyCheck(CreateData);
const INSTANCE_ID = /^fp-local-[0-9a-f]{16}$/;

export interface LocalProviderOptions {
  /** Directory holding one data directory per started server (default: the system temp directory). */
  root?: string;
  /** The command that runs the CLI (default: this Node and this package's `cli/main.js`); `start` is appended. */
  command?: readonly string[];
  /**
   * Config every started server gets under the fields the provider sets (the operator's `manager.localConfig`,
   * trusted: e.g. the autoscaler, shutdown timings); its `server`, `http`, `mesh`, `manager`, `autoscaler` and `log` sections are merged.
   */
  baseConfig?: Record<string, unknown>;
  /** How long a terminated server has to exit after SIGTERM before it is killed. */
  stopTimeoutMs?: number;
  log: { info(details: Record<string, unknown>, message: string): void; warn(details: Record<string, unknown>, message: string): void };
}

interface Instance {
  pid: number;
  child?: ChildProcess;
  exited: Promise<number | null>;
}

/** The built CLI: next to this file in dist/, or under dist/ when this file runs from the sources. */
function defaultCommand(): string[] {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const built = [path.join(root, 'cli', 'main.js'), path.join(root, 'dist', 'cli', 'main.js')].find((file) => existsSync(file));
  return [process.execPath, built ?? path.join(root, 'cli', 'main.js')];
}
const reply = (status: number, data: unknown): ApiReply => ({ status, data });

/** A port free on `host` right now, for a server that must be told its ports before it starts. */
async function freePort(host: string): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The environment of a started server: the config file decides, so no inherited FLEETPLANE_* overrides it. */
function childEnvironment(configFile: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('FLEETPLANE_') && name !== 'WEB_CONCURRENCY') env[name] = value;
  return { ...env, FLEETPLANE_CONFIG: configFile };
}

/**
 * The built-in `local` provider (SPEC 13.4): `create` starts a real Fleetplane server on this host (its own data
 * directory and free ports on 127.0.0.1, the cluster's mesh secret and store, the manager connection of a managed
 * server, the autoscaler settings of the server that asked for it) and
 * answers its instance id; `terminate` stops it gracefully (SIGTERM) and answers its exit code. Secrets go
 * into the server's config file (mode 0600), never into its argv or environment.
 */
export class LocalProvider implements BuiltinProvider {
  readonly endpoints = { create: 'post', terminate: 'post' } as const;
  private readonly instances = new Map<string, Instance>();
  private readonly root: string;

  constructor(private readonly options: LocalProviderOptions) {
    this.root = options.root ?? tmpdir();
  }

  async call(endpoint: string, data: Record<string, unknown>): Promise<ApiReply> {
    return endpoint === 'create' ? this.create(data) : this.terminate(data);
  }

  /** Stops every server this provider started and still runs (the parent is shutting down its tests). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.instances.keys()].map((instanceId) => this.terminate({ instanceId })));
  }

  private async create(data: Record<string, unknown>): Promise<ApiReply> {
    const violation = schemaViolation(createCheck, data, 'data');
    if (violation) return reply(400, { error: violation });
    const valid = data as CreateData;
    const instanceId = `fp-local-${randomBytes(8).toString('hex')}`;
    const dataDir = path.join(this.root, instanceId);
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const host = '127.0.0.1';
    const [httpPort, meshPort] = [await freePort(host), await freePort(host)];
    const { startup, deployment } = valid;
    const base = this.options.baseConfig ?? {};
    // The base config's sections keep their other fields (mesh timings, the parent's timeout); the provider's win.
    const section = (name: string) => (typeof base[name] === 'object' && base[name] !== null && !Array.isArray(base[name]) ? (base[name] as Record<string, unknown>) : {});
    const config = {
      ...base,
      dataDir,
      workers: { ...section('workers'), count: deployment?.workers ?? 1 },
      server: { ...section('server'), id: valid.server_id, cluster: valid.cluster_id, organization: startup.server.organization, publicUrl: `http://${host}:${httpPort}` },
      http: { ...section('http'), port: httpPort, host },
      mesh: { ...section('mesh'), port: meshPort, host, url: `ws://${host}:${meshPort}`, ...(startup.mesh ? { secret: startup.mesh.secret } : {}) },
      ...(startup.db ? { db: startup.db } : {}),
      ...(startup.postgres ? { postgres: startup.postgres } : {}),
      ...(startup.mongodb ? { mongodb: startup.mongodb } : {}),
      ...(startup.manager ? { manager: { ...section('manager'), organizationId: startup.manager.organizationId, host: startup.manager.host, apiKey: startup.manager.apiKey } } : {}),
      ...(startup.autoscaler ? { autoscaler: { ...section('autoscaler'), ...startup.autoscaler } } : {}),
      ...(deployment?.logLevel ? { log: { ...section('log'), level: deployment.logLevel } } : {}),
    };
    const configFile = path.join(dataDir, 'fleetplane.config.json');
    writeFileSync(configFile, JSON.stringify(config), { mode: 0o600 });
    const logFd = openSync(path.join(dataDir, 'server.log'), 'a', 0o600);
    const [command, ...args] = this.options.command ?? defaultCommand();
    let child: ChildProcess;
    try {
      child = spawn(command!, [...args, 'start'], { cwd: dataDir, env: childEnvironment(configFile), detached: true, stdio: ['ignore', logFd, logFd] });
      await new Promise<void>((resolve, reject) => child.once('spawn', resolve).once('error', reject));
    } catch (error) {
      return reply(502, { error: `the server could not be started: ${error instanceof Error ? error.message : String(error)}` });
    } finally {
      closeSync(logFd);
    }
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // The started server lives on its own; the parent's process must not wait for it.
    child.unref();
    const pid = child.pid!;
    this.instances.set(instanceId, { pid, child, exited });
    writeFileSync(path.join(dataDir, 'instance.json'), JSON.stringify({ instanceId, pid }), { mode: 0o600 });
    void exited.then((code) => {
      this.instances.delete(instanceId);
      this.options.log.info({ instanceId, server: valid.server_id, code }, 'local server exited');
    });
    this.options.log.info({ instanceId, server: valid.server_id, pid, http: config.server.publicUrl }, 'local server started');
    return reply(200, { instanceId, pid, url: config.server.publicUrl, meshUrl: config.mesh.url, dataDir });
  }

  private async terminate(data: Record<string, unknown>): Promise<ApiReply> {
    const instanceId = data.instanceId;
    if (typeof instanceId !== 'string' || !INSTANCE_ID.test(instanceId)) return reply(400, { error: 'data.instanceId: not an instance of the local provider' });
    const instance = this.instances.get(instanceId) ?? this.recorded(instanceId);
    if (!instance) return reply(404, { error: `no local server ${instanceId}` });
    try {
      process.kill(instance.pid, 'SIGTERM');
    } catch {
      // Already gone: terminated is what was asked for.
      return reply(200, { instanceId, exitCode: null });
    }
    const stopTimeoutMs = this.options.stopTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), stopTimeoutMs)));
    const outcome = await Promise.race([instance.exited, timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.options.log.warn({ instanceId, stopTimeoutMs }, 'local server did not stop in time: killed');
      try {
        process.kill(-instance.pid, 'SIGKILL');
      } catch {
        // gone in the meantime
      }
      return reply(200, { instanceId, exitCode: null, killed: true });
    }
    return reply(200, { instanceId, exitCode: outcome });
  }

  /** A server started by an earlier run of this parent: known from its instance file, watched by polling. */
  private recorded(instanceId: string): Instance | undefined {
    let pid: number;
    try {
      pid = (JSON.parse(readFileSync(path.join(this.root, instanceId, 'instance.json'), 'utf8')) as { pid: number }).pid;
    } catch {
      return undefined;
    }
    if (!Number.isInteger(pid) || pid <= 1) return undefined;
    const exited = new Promise<number | null>((resolve) => {
      const poll = setInterval(() => {
        try {
          process.kill(pid, 0);
        } catch {
          clearInterval(poll);
          resolve(null);
        }
      }, 100);
      poll.unref();
    });
    return { pid, exited };
  }
}
