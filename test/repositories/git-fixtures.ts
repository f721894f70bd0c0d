import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Test } from 'tap';
import { TEST_ENV, own } from '../helpers/processes.js';

export const GIT_ENV = {
  ...process.env,
  ...TEST_ENV,
  GIT_AUTHOR_NAME: 'Test', GIT_AUTHOR_EMAIL: 'test@example.com', GIT_COMMITTER_NAME: 'Test', GIT_COMMITTER_EMAIL: 'test@example.com',
  GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null',
};

/** git in a directory, failing the test setup loudly. */
export function gitSync(cwd: string, ...args: string[]): string {
  const result = spawnSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr}`);
  return result.stdout.trim();
}

/** A bare repository `<root>/<name>.git` with `main` (README) and `feature` branches. */
export function bareRepository(root: string, name: string): string {
  const bare = path.join(root, 'remotes', `${name}.git`);
  mkdirSync(bare, { recursive: true });
  gitSync(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  const seed = path.join(root, 'seeds', name);
  mkdirSync(seed, { recursive: true });
  gitSync(seed, 'init', '--quiet', '--initial-branch=main');
  writeFileSync(path.join(seed, 'README.md'), `# ${name}\n`);
  gitSync(seed, 'add', '.');
  gitSync(seed, 'commit', '--quiet', '-m', 'first');
  gitSync(seed, 'branch', 'feature');
  gitSync(seed, 'push', '--quiet', bare, 'main', 'feature');
  return bare;
}

/** Adds a commit to `branch` of the bare repository from a scratch clone; returns its hash. */
export function commitUpstream(root: string, bare: string, branch: string, file: string): string {
  const scratch = path.join(root, 'scratch', `${path.basename(bare)}-${file}`);
  gitSync(root, 'clone', '--quiet', '--branch', branch, bare, scratch);
  writeFileSync(path.join(scratch, file), 'upstream\n');
  gitSync(scratch, 'add', '.');
  gitSync(scratch, 'commit', '--quiet', '-m', `upstream ${file}`);
  gitSync(scratch, 'push', '--quiet', 'origin', branch);
  return gitSync(scratch, 'rev-parse', 'HEAD');
}

/** A pre-receive hook that records its pid and then hangs: pushes to this repository never finish. */
export function hangPushes(bare: string): string {
  const pidFile = path.join(bare, 'hook.pid');
  const hook = path.join(bare, 'hooks', 'pre-receive');
  writeFileSync(hook, `#!/bin/sh\necho $$ > '${pidFile}'\nexec sleep 300\n`);
  chmodSync(hook, 0o755);
  return pidFile;
}

export interface SmartHttp {
  url: string;
  /** Authorization headers received (decoded user:password). */
  credentials: string[];
  /** `ps` output captured while an authenticated request was being served. */
  psDuringRun: string[];
}

/**
 * Git's smart HTTP protocol over `git http-backend`, behind Basic authentication: the first request of each
 * exchange gets 401, as a real forge answers, so the client must ask its askpass helper.
 */
export async function smartHttpServer(t: Test, projectRoot: string, password: string): Promise<SmartHttp> {
  const state: SmartHttp = { url: '', credentials: [], psDuringRun: [] };
  const server = http.createServer((req, res) => {
    const header = req.headers.authorization ?? '';
    const decoded = header.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString('utf8') : '';
    if (!decoded) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
      return;
    }
    state.credentials.push(decoded);
    state.psDuringRun.push(spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout);
    if (decoded !== `x-access-token:${password}`) {
      res.writeHead(403).end();
      return;
    }
    const url = new URL(req.url!, 'http://stand-in');
    const backend = own(spawn('git', ['http-backend'], {
      env: {
        ...GIT_ENV, GIT_PROJECT_ROOT: projectRoot, GIT_HTTP_EXPORT_ALL: '1', REMOTE_USER: 'x-access-token',
        PATH_INFO: url.pathname, QUERY_STRING: url.search.slice(1), REQUEST_METHOD: req.method!, CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
      },
    }), { group: false });
    req.pipe(backend.stdin);
    const chunks: Buffer[] = [];
    backend.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    backend.on('close', () => {
      const output = Buffer.concat(chunks);
      const split = output.indexOf('\r\n\r\n');
      const head = output.subarray(0, split).toString('utf8').split('\r\n');
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (name === 'status') status = Number(value.split(' ')[0]);
        else headers[name] = value;
      }
      res.writeHead(status, headers).end(output.subarray(split + 4));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
