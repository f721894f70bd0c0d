import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import { ConfigSchema, leafPaths, type ResolvedConfig } from './schema.js';
import { ConfigError } from './errors.js';
import { closestMatch } from './did-you-mean.js';
import { assertAddressRanges, assertEgressAllow, assertRedirectUrl, assertSafeEnv, assertSafeExecArgv, nodeOptionsWarning } from './guards.js';
import { unknownVariableWarnings } from './environment.js';

export const CONFIG_FILE_NAME = 'fleetplane.config.json';

/** Flags of `fleetplane start` that map onto config fields. */
export interface ConfigFlags {
  config?: string;
  port?: string;
  workers?: string;
  dataDir?: string;
}

export interface LoadOptions {
  flags?: ConfigFlags;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** A config object given in code (`Fleetplane.init(config)`), in place of the file. */
  object?: unknown;
}

export interface LoadedConfig {
  config: ResolvedConfig;
  file?: string;
  warnings: string[];
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

const LEAVES = leafPaths();
const toEnvName = (leaf: string) =>
  `FLEETPLANE_${leaf.split('.').map((part) => part.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_')}`;
/** `FLEETPLANE_HTTP_PORT` → `http.port`, plus the documented short form `FLEETPLANE_WORKERS`. */
export const ENV_VARIABLES: ReadonlyMap<string, string> = new Map([
  ...LEAVES.map((leaf) => [toEnvName(leaf), leaf] as [string, string]),
  ['FLEETPLANE_WORKERS', 'workers.count'],
]);

function schemaAt(leaf: string): TSchema {
  let schema: TSchema = ConfigSchema;
  for (const part of leaf.split('.')) schema = (schema.properties as Record<string, TSchema>)[part]!;
  return schema;
}

function setPath(target: Json, leaf: string, value: unknown): void {
  const parts = leaf.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    if (!isObject(node[part])) node[part] = {};
    node = node[part] as Json;
  }
  node[parts.at(-1)!] = value;
}

/** Parse a string from the environment or the command line into the type the schema expects. */
export function coerce(leaf: string, raw: string, source: string): unknown {
  const schema = schemaAt(leaf);
  const kinds = new Set<string>(schema.anyOf ? schema.anyOf.map((option: TSchema) => option.type ?? typeof option.const) : [schema.type]);
  const trimmed = raw.trim();
  if ((kinds.has('integer') || kinds.has('number')) && /^-?\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  if (kinds.has('boolean') && /^(true|false)$/i.test(trimmed)) return trimmed.toLowerCase() === 'true';
  if (kinds.has('array') || kinds.has('object')) {
    try {
      return JSON.parse(trimmed);
    } catch {
      if (kinds.has('array')) return trimmed.split(/\s+/).filter(Boolean);
      throw new ConfigError(leaf, `${source} must be JSON`, source);
    }
  }
  return raw;
}

function readFile(file: string): Json {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError('', `cannot read config file (${(error as NodeJS.ErrnoException).code ?? 'error'})`, file);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigError('', `invalid JSON: ${(error as Error).message}`, file);
  }
  if (!isObject(parsed)) throw new ConfigError('', 'the config file must hold a JSON object', file);
  return parsed;
}

/** Keys the schema does not know, with a did-you-mean against every real path. */
function assertKnownKeys(value: Json, schema: TSchema, prefix: string, source?: string): void {
  if (schema.type !== 'object' || !schema.properties) return;
  const properties = schema.properties as Record<string, TSchema>;
  for (const key of Object.keys(value)) {
    const field = prefix ? `${prefix}.${key}` : key;
    const child = properties[key];
    if (!child) {
      const hint = closestMatch(field, LEAVES.concat(Object.keys(ConfigSchema.properties)));
      throw new ConfigError(field, `unknown key${hint ? ` (did you mean "${hint}"?)` : ''}`, source);
    }
    if (isObject(value[key])) assertKnownKeys(value[key] as Json, child, field, source);
  }
}

const range = (schema: TSchema) =>
  schema.minimum !== undefined && schema.maximum !== undefined
    ? ` from ${schema.minimum} to ${schema.maximum}`
    : schema.minimum !== undefined
      ? ` of at least ${schema.minimum}`
      : schema.maximum !== undefined
        ? ` of at most ${schema.maximum}`
        : '';

/** What a schema accepts, in words: `"auto" or an integer from 0 to 256`. */
export function describeSchema(schema: TSchema): string {
  if (schema.anyOf) return (schema.anyOf as TSchema[]).map(describeSchema).join(' or ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  switch (schema.type) {
    case 'integer':
      return `an integer${range(schema)}`;
    case 'number':
      return `a number${range(schema)}`;
    case 'boolean':
      return 'true or false';
    case 'string':
      return schema.pattern ? `a string matching ${schema.pattern}` : schema.minLength ? 'a non-empty string' : 'a string';
    case 'array':
      return schema.items ? `a list of ${describeSchema(schema.items as TSchema).replace(/^an? /, '')}s` : 'a list';
    case 'object':
      return 'an object';
    default:
      return 'a valid value';
  }
}

/** The schema of a dotted field path, when the path names one. */
function schemaOfField(field: string): TSchema | undefined {
  let schema: TSchema | undefined = ConfigSchema;
  for (const part of field.split('.')) {
    schema = (schema?.properties as Record<string, TSchema> | undefined)?.[part] ?? (schema?.type === 'object' && schema.patternProperties ? (Object.values(schema.patternProperties)[0] as TSchema) : undefined);
    if (!schema) return undefined;
  }
  return schema;
}

/**
 * The first invalid field, blamed on where its value came from (an environment variable, a flag or the file)
 * and described by what it should be.
 */
function firstSchemaError(value: unknown, sources: ReadonlyMap<string, string>, file?: string): ConfigError | undefined {
  const error = Value.Errors(ConfigSchema, value).First();
  if (!error) return undefined;
  const field = error.path.replace(/^\//, '').replaceAll('/', '.');
  const shown = error.value === undefined ? 'missing' : JSON.stringify(error.value);
  const schema = schemaOfField(field);
  const source = [...sources].find(([leaf]) => field === leaf || field.startsWith(`${leaf}.`))?.[1] ?? file;
  return new ConfigError(field, `${schema ? `expected ${describeSchema(schema)}` : error.message} (got ${shown})`, source);
}

/** file → environment → flags, then defaults, then validation. Throws `ConfigError` on the first problem. */
export function loadConfig(options: LoadOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const flags = options.flags ?? {};
  const warnings: string[] = [];

  let file: string | undefined;
  let input: Json;
  if (options.object !== undefined) {
    if (!isObject(options.object)) throw new ConfigError('', 'config must be an object');
    // A JSON round trip keeps an own `__proto__` key (which the guard below must see) where structuredClone drops it.
    input = JSON.parse(JSON.stringify(options.object)) as Json;
  } else {
    const explicit = flags.config ?? env.FLEETPLANE_CONFIG;
    const candidate = path.resolve(cwd, explicit ?? CONFIG_FILE_NAME);
    if (explicit || existsSync(candidate)) file = candidate;
    input = file ? readFile(file) : {};
  }
  // `workers: 4` and `workers: "auto"` are shorthands for `workers: { count }`.
  if (input.workers !== undefined && !isObject(input.workers)) input.workers = { count: input.workers };
  assertKnownKeys(input, ConfigSchema, '', file);
  const workersInput = input.workers as Json | undefined;
  if (isObject(workersInput?.env)) assertSafeEnv(workersInput.env);

  // Where each overridden field came from, so an error names the variable or flag rather than the file.
  const sources = new Map<string, string>();
  for (const [name, leaf] of ENV_VARIABLES) {
    const raw = env[name];
    if (raw !== undefined && raw !== '') {
      setPath(input, leaf, coerce(leaf, raw, name));
      sources.set(leaf, `environment variable ${name}`);
    }
  }
  const flagFields: Array<[keyof ConfigFlags, string, string]> = [
    ['port', 'http.port', '--port'],
    ['workers', 'workers.count', '--workers'],
    ['dataDir', 'dataDir', '--data-dir'],
  ];
  for (const [flag, leaf, name] of flagFields) {
    const raw = flags[flag];
    if (raw !== undefined) {
      setPath(input, leaf, coerce(leaf, raw, name));
      sources.set(leaf, `flag ${name}`);
    }
  }
  // SPEC 1.8, the same guard wherever the value came from: a variable's JSON has its own `__proto__` key too.
  const workersEnv = (input.workers as Json | undefined)?.env;
  if (isObject(workersEnv)) {
    try {
      assertSafeEnv(workersEnv);
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigError(error.field, error.reason, sources.get('workers.env') ?? file);
      throw error;
    }
  }

  const withDefaults = Value.Default(ConfigSchema, input);
  const invalid = firstSchemaError(withDefaults, sources, file);
  if (invalid) throw invalid;
  const config = withDefaults as ResolvedConfig;

  assertSafeExecArgv(config.workers.execArgv);
  assertAddressRanges(config.http.trustProxy);
  assertEgressAllow(config.egress.allow);
  assertSafeEnv(config.workers.env);
  assertRedirectUrl(config.fallback.redirect, sources.get('fallback.redirect') ?? file);
  const advisory = nodeOptionsWarning(config.workers.env);
  if (advisory) warnings.push(advisory);
  warnings.push(...unknownVariableWarnings(env, ENV_VARIABLES.keys()));
  if (config.health.wedgedTimeoutMs > 0 && config.health.wedgedTimeoutMs < 2 * config.health.heartbeatMs) {
    throw new ConfigError('health.wedgedTimeoutMs', 'must be at least 2 × health.heartbeatMs', file);
  }
  const needsHeartbeat = config.workers.maxRssMb || config.health.wedgedTimeoutMs || config.health.maxEventLoopLagMs || config.health.lagSpikeMs;
  if (needsHeartbeat && config.health.heartbeatMs === 0) {
    throw new ConfigError('health.heartbeatMs', 'must be > 0 when an RSS, wedged or lag recycle policy is on', file);
  }
  if (config.postgres.url && config.mongodb.url) {
    const source = sources.get('postgres.url') ?? sources.get('mongodb.url') ?? file;
    throw new ConfigError('postgres.url', 'cannot be set together with mongodb.url: the store is one backend, choose PostgreSQL or MongoDB', source);
  }
  // Checked here rather than by a schema pattern, whose error would show the value and the password in it.
  if (config.postgres.url && !/^postgres(ql)?:\/\//.test(config.postgres.url)) {
    throw new ConfigError('postgres.url', 'must be a connection string starting with postgres:// or postgresql://', sources.get('postgres.url') ?? file);
  }
  if (Boolean(config.https.key) !== Boolean(config.https.cert)) {
    throw new ConfigError(config.https.key ? 'https.cert' : 'https.key', 'HTTPS needs both key and cert', file);
  }
  if (config.autoscaler.powerOffOnRemoval && !config.lifecycle.hostControl) {
    throw new ConfigError('autoscaler.powerOffOnRemoval', 'needs lifecycle.hostControl: true (the power-off runs lifecycle.shutdownCommand)', sources.get('autoscaler.powerOffOnRemoval') ?? file);
  }
  if (config.manager.localConfig) assertLocalConfig(config.manager.localConfig, sources.get('manager.localConfig') ?? file);
  config.dataDir = path.resolve(cwd, config.dataDir);
  return { config, file, warnings };
}

/**
 * `manager.localConfig` is the config of the servers the local provider starts: checked as one here, so a
 * mistake in it stops this server's start rather than every start of theirs.
 */
function assertLocalConfig(local: Json, source?: string): void {
  try {
    loadConfig({ object: local, env: {} });
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`manager.localConfig${error.field ? `.${error.field}` : ''}`, error.reason, source);
    throw error;
  }
}
