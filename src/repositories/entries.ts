import path from 'node:path';

/** One `repositories[]` entry of a cluster document, defaults applied and its checkout path resolved (SPEC 14.3). */
export interface RepositoryEntry {
  index: number;
  url: string;
  /** Id of the `apis` record holding its credential; otherwise one is matched by the URL's host. */
  api?: string;
  branch: string;
  remote: string;
  /** Absolute path of the checkout: `localFsRoot` / `directory`. */
  checkout: string;
  enabled: boolean;
  onStartup: 'clone' | false;
  onShutdown: 'commit-and-push' | false;
  startupTimeoutMs: number;
  shutdownTimeoutMs: number;
  initialUpload: { enabled: boolean; completed: boolean };
}

/** An entry that cannot be used, named by its index and field; the other entries proceed. */
export interface RefusedEntry {
  index: number;
  field: string;
  reason: string;
}

export interface ParsedRepositories {
  entries: RepositoryEntry[];
  refused: RefusedEntry[];
  /** Set when the list as a whole is unusable (duplicate URL or checkout, the project itself): nothing is cloned. */
  conflict?: string;
}

const DEFAULTS = { branch: 'main', remote: 'origin', localFsRoot: '..', startupTimeoutMs: 60_000, shutdownTimeoutMs: 10_000 };
const MAX_TIMEOUT_MS = 3_600_000;
const NAME = /^[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}$/;

class Refusal extends Error {
  constructor(readonly field: string, reason: string) {
    super(reason);
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `https://host/owner/project.git`, `ssh://git@host/owner/project.git`, `git@host:owner/project.git` or a local path. */
export function repositoryName(url: string): string {
  const last = url.replace(/[/\\]+$/, '').split(/[/:\\]/).at(-1) ?? '';
  return last.replace(/\.git$/, '');
}

/** URLs git would take for an option (`-u…`, `--upload-pack=…`) or that carry credentials are refused. */
function checkUrl(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw new Refusal('url', 'is required (a git URL)');
  if (value.length > 2048 || value.startsWith('-') || /[\s\0]/.test(value)) throw new Refusal('url', 'is not a usable git URL');
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/@]*@/i.test(value) && !/^ssh:\/\/[^/:@]+@/i.test(value)) {
    throw new Refusal('url', 'must not carry credentials; they come from the organization\'s apis records');
  }
  if (/^ext::/i.test(value)) throw new Refusal('url', 'the ext:: transport runs commands and is refused');
  return value;
}

function optionalName(entry: Record<string, unknown>, field: 'branch' | 'remote' | 'directory', fallback: string): string {
  const value = entry[field];
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !NAME.test(value) || value.includes('..')) throw new Refusal(field, 'must be a plain name (letters, digits, . _ - /, no "..")');
  return value;
}

function timeout(entry: Record<string, unknown>, field: 'startupTimeoutMs' | 'shutdownTimeoutMs'): number {
  const value = entry[field];
  if (value === undefined) return DEFAULTS[field];
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_TIMEOUT_MS) throw new Refusal(field, `must be an integer from 1 to ${MAX_TIMEOUT_MS} (ms)`);
  return value;
}

function switchValue<T extends string>(entry: Record<string, unknown>, field: string, allowed: T): T | false {
  const value = entry[field];
  if (value === undefined) return allowed;
  if (value === false || value === allowed) return value as T | false;
  throw new Refusal(field, `must be "${allowed}" or false`);
}

function flag(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new Refusal(field, 'must be true or false');
  return value;
}

function parseEntry(raw: unknown, index: number, projectRoot: string): RepositoryEntry {
  if (!isRecord(raw)) throw new Refusal('', 'must be an object');
  const url = checkUrl(raw.url);
  const root = raw.localFsRoot === undefined ? DEFAULTS.localFsRoot : raw.localFsRoot;
  if (typeof root !== 'string' || root === '' || root.includes('\0')) throw new Refusal('localFsRoot', 'must be a directory path');
  const directory = optionalName(raw, 'directory', repositoryName(url));
  if (!directory || !NAME.test(directory)) throw new Refusal('directory', 'cannot be derived from the URL; set it');
  if (raw.api !== undefined && (typeof raw.api !== 'string' || raw.api === '')) throw new Refusal('api', 'must be the id of an apis record');
  const upload = raw.initialUpload === undefined ? {} : raw.initialUpload;
  if (!isRecord(upload)) throw new Refusal('initialUpload', 'must be an object');
  return {
    index,
    url,
    api: raw.api as string | undefined,
    branch: optionalName(raw, 'branch', DEFAULTS.branch),
    remote: optionalName(raw, 'remote', DEFAULTS.remote),
    checkout: path.resolve(projectRoot, root, directory),
    enabled: flag(raw.enabled, 'enabled', true),
    onStartup: switchValue(raw, 'onStartup', 'clone'),
    onShutdown: switchValue(raw, 'onShutdown', 'commit-and-push'),
    startupTimeoutMs: timeout(raw, 'startupTimeoutMs'),
    shutdownTimeoutMs: timeout(raw, 'shutdownTimeoutMs'),
    initialUpload: { enabled: flag(upload.enabled, 'initialUpload.enabled', false), completed: flag(upload.completed, 'initialUpload.completed', false) },
  };
}

const inside = (parent: string, child: string) => {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
};

/**
 * The cluster document's `repositories[]`: malformed entries are refused one by one (index and field); a
 * duplicate URL or checkout, or a checkout that is (or holds) the running project, makes the
 * whole list a conflict, decided before anything is cloned.
 */
export function parseRepositories(raw: unknown, projectRoot: string): ParsedRepositories {
  if (raw === undefined) return { entries: [], refused: [] };
  if (!Array.isArray(raw)) return { entries: [], refused: [{ index: -1, field: 'repositories', reason: 'must be a list' }] };
  const entries: RepositoryEntry[] = [];
  const refused: RefusedEntry[] = [];
  raw.forEach((item, index) => {
    try {
      entries.push(parseEntry(item, index, projectRoot));
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      refused.push({ index, field: error.field ? `repositories[${index}].${error.field}` : `repositories[${index}]`, reason: error.message });
    }
  });
  const project = path.resolve(projectRoot);
  const seenUrls = new Map<string, number>();
  const seenCheckouts = new Map<string, number>();
  for (const entry of entries) {
    const sameUrl = seenUrls.get(entry.url);
    if (sameUrl !== undefined) return { entries: [], refused, conflict: `repositories[${entry.index}].url: the same URL as repositories[${sameUrl}]` };
    const sameCheckout = seenCheckouts.get(entry.checkout);
    if (sameCheckout !== undefined) return { entries: [], refused, conflict: `repositories[${entry.index}].directory: the same checkout as repositories[${sameCheckout}] (${entry.checkout})` };
    // A checkout at the project, or above it, would clone over the running code; one below it is only nested.
    if (inside(entry.checkout, project)) {
      return { entries: [], refused, conflict: `repositories[${entry.index}].directory: ${entry.checkout} is the running project (or holds it)` };
    }
    seenUrls.set(entry.url, entry.index);
    seenCheckouts.set(entry.checkout, entry.index);
  }
  return { entries, refused };
}
