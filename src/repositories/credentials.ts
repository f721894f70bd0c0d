import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Document } from '../db/types.js';
import { revealSecrets } from '../secrets/fields.js';
import type { SecretOpener } from '../secrets/keyring.js';

/** The askpass helper answers git's prompts from its own environment: the secret never reaches argv or a file. */
export const ASKPASS_USERNAME_ENV = 'FLEETPLANE_GIT_USERNAME';
export const ASKPASS_PASSWORD_ENV = 'FLEETPLANE_GIT_PASSWORD';
const ASKPASS_SCRIPT = `#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' "$${ASKPASS_USERNAME_ENV}" ;;
  *) printf '%s\\n' "$${ASKPASS_PASSWORD_ENV}" ;;
esac
`;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The host a git URL reaches: `https://host/...`, `ssh://user@host:22/...`, `user@host:path`; a local path has none. */
export function gitHost(url: string): string | undefined {
  const scp = /^[^/:@]+@([^/:]+):/.exec(url);
  if (scp) return scp[1]!.toLowerCase();
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'file:' ? undefined : parsed.hostname.toLowerCase() || undefined;
  } catch {
    return undefined;
  }
}

export const isSshUrl = (url: string) => /^ssh:\/\//i.test(url) || /^[^/:@]+@[^/:]+:/.test(url);

/** `Bearer x`, `token x`, `Basic base64(user:pass)` or a bare token. */
function tokenOf(authorization: string): { username?: string; password: string } {
  const [scheme = '', ...rest] = authorization.trim().split(/\s+/);
  if (/^basic$/i.test(scheme) && rest.length === 1) {
    const decoded = Buffer.from(rest[0]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  if (/^(bearer|token)$/i.test(scheme) && rest.length === 1) return { password: rest[0]! };
  return { password: authorization.trim() };
}

const quote = (value: string) => `'${value.replaceAll("'", "'\\''")}'`;

export interface CredentialDeps {
  /** The organization's `apis` records, secrets still sealed. */
  apis(): Promise<Document[]>;
  secrets?: SecretOpener;
  /** Outside every checkout: the askpass helper, SSH keys and known-hosts files. */
  stateDir: string;
  baseEnv: NodeJS.ProcessEnv;
}

/**
 * SPEC 14.3: the environment git runs with for one repository URL. The credential is the `authorization`
 * header (HTTPS; `git-username` names the user, default `x-access-token`) or the `git-ssh-key` header (SSH,
 * with `git-known-hosts`) of the `apis` record named by the entry, else of the record whose base URL has the
 * repository's host. Those `git-*` headers are never sent to the provider. SSH always checks host keys strictly.
 */
export class RepositoryCredentials {
  constructor(private readonly deps: CredentialDeps) {}

  async environment(url: string, api?: string): Promise<NodeJS.ProcessEnv> {
    const env: NodeJS.ProcessEnv = {
      ...this.deps.baseEnv,
      GIT_TERMINAL_PROMPT: '0',
      // No helper may store what askpass answers, and no prompt may fall back to a terminal.
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'credential.helper',
      GIT_CONFIG_VALUE_0: '',
    };
    delete env[ASKPASS_USERNAME_ENV];
    delete env[ASKPASS_PASSWORD_ENV];
    const record = await this.record(url, api);
    const headers = record && isRecord(record.headers) ? record.headers : {};
    const secretOf = (name: string) => {
      const header = headers[name];
      return isRecord(header) && typeof header.secret === 'string' ? header.secret : typeof header === 'string' ? header : undefined;
    };
    if (isSshUrl(url)) {
      const options = ['ssh', '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes'];
      const key = secretOf('git-ssh-key');
      if (key) options.push('-i', quote(this.file('keys', key, key.endsWith('\n') ? key : `${key}\n`)), '-o', 'IdentitiesOnly=yes');
      const knownHosts = secretOf('git-known-hosts');
      if (knownHosts) options.push('-o', quote(`UserKnownHostsFile=${this.file('known_hosts', knownHosts, knownHosts.endsWith('\n') ? knownHosts : `${knownHosts}\n`)}`));
      env.GIT_SSH_COMMAND = options.join(' ');
      return env;
    }
    const authorization = secretOf('authorization');
    if (authorization) {
      const token = tokenOf(authorization);
      env.GIT_ASKPASS = this.file('bin', 'askpass', ASKPASS_SCRIPT, 0o700);
      env[ASKPASS_USERNAME_ENV] = token.username ?? secretOf('git-username') ?? 'x-access-token';
      env[ASKPASS_PASSWORD_ENV] = token.password;
    }
    return env;
  }

  private async record(url: string, api: string | undefined): Promise<Document | undefined> {
    const host = gitHost(url);
    const records = (await this.deps.apis()).filter((record) => record.enabled !== false && record.disabled !== true);
    const chosen = api
      ? records.find((record) => record._id === api || record.name === api)
      : records.find((record) => typeof record.baseUrl === 'string' && host !== undefined && gitHost(record.baseUrl) === host);
    return chosen && revealSecrets('apis', chosen, this.deps.secrets);
  }

  /** A file under the state directory, named by a hash of its content, mode 0600 (0700 for the helper). */
  private file(folder: string, name: string, content: string, mode = 0o600): string {
    const directory = path.join(this.deps.stateDir, folder);
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    const file = path.join(directory, folder === 'bin' ? name : createHash('sha256').update(name).digest('hex').slice(0, 24));
    writeFileSync(file, content, { mode });
    chmodSync(file, mode);
    return file;
  }
}
