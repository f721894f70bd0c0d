import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ServerProcess, cleanEnv } from '../helpers/server-process.js';
import { MESH_FIXTURE } from '../mesh/helpers.js';
import { killOnExit, run, tryRun, undoOnExit } from './cleanup.js';

// Three servers, each in its own network namespace, joined by a bridge in a fourth (the hub); a client in a
// fifth; on request a store host (`p`) and a sink (`s`, see `cutPath`). Names carry this process's pid,
// addresses exist only inside those namespaces.

export const HTTP_PORT = 8080;
export const MESH_PORT = 8090;
export const names = ['a', 'b', 'c'] as const;
export type Name = (typeof names)[number];
/** A namespace on the bridge: a server, the client `x`, the store's host `p`, the sink `s`. */
export type Member = Name | 'x' | 'p' | 's';

const tag = String(process.pid);
export const hub = `fph${tag}`;
export const ns = (name: Member) => `fp${name}${tag}`;
export const address = (name: Member) => `10.201.0.${{ a: 1, b: 2, c: 3, s: 8, x: 9, p: 10 }[name]}`;
/** The bridge's end of a namespace's veth pair (in the hub). */
export const bridgePort = (name: Member) => `v${name}${tag}h`;
export const urlOf = (name: Name) => `http://${address(name)}:${HTTP_PORT}`;

/** Why these tests cannot run here, or undefined. */
export const skipReason = process.getuid?.() !== 0 ? 'needs root: it creates network namespaces, veth pairs and a bridge' : !tryRun('ip', ['-V']) ? 'needs the ip command (iproute2)' : undefined;

/**
 * Builds the namespaces and the bridge; removed when the file ends, however it ends. `gsoMaxSegs: 1` makes every
 * TCP segment leave as one frame of at most the MSS: a veth lets a larger GSO frame through whatever the MTU of
 * the receiving end, so without it a lowered MTU drops nothing.
 */
export function buildNetwork(options: { gsoMaxSegs?: number; extra?: Array<'p' | 's'> } = {}): void {
  const members: Member[] = [...names, 'x', ...(options.extra ?? [])];
  undoOnExit(() => {
    for (const name of members) tryRun('ip', ['netns', 'del', ns(name)]);
    tryRun('ip', ['netns', 'del', hub]);
  });
  run('ip', ['netns', 'add', hub]);
  run('ip', ['-n', hub, 'link', 'add', 'br0', 'type', 'bridge']);
  run('ip', ['-n', hub, 'link', 'set', 'br0', 'up']);
  for (const name of members) {
    run('ip', ['netns', 'add', ns(name)]);
    run('ip', ['-n', hub, 'link', 'add', bridgePort(name), 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns(name)]);
    run('ip', ['-n', hub, 'link', 'set', bridgePort(name), 'master', 'br0', 'up']);
    run('ip', ['-n', ns(name), 'addr', 'add', `${address(name)}/24`, 'dev', 'eth0']);
    if (options.gsoMaxSegs) run('ip', ['-n', ns(name), 'link', 'set', 'eth0', 'gso_max_segs', String(options.gsoMaxSegs)]);
    run('ip', ['-n', ns(name), 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', ns(name), 'link', 'set', 'lo', 'up']);
  }
}

/**
 * Cuts the path between two namespaces both ways, as a firewall that drops would: each routes the other's address
 * through the sink `s`, which does not forward (a new namespace's default), so packets vanish without an error (a
 * connect waits, an open connection retransmits) and every other path stays up. Undone by the returned function,
 * or when the file ends. Needs `buildNetwork({ extra: ['s', ...] })`.
 */
export function cutPath(from: Member, to: Member): () => void {
  const routes: Array<[Member, Member]> = [
    [from, to],
    [to, from],
  ];
  for (const [side, other] of routes) run('ip', ['-n', ns(side), 'route', 'add', `${address(other)}/32`, 'via', address('s')]);
  return undoOnExit(() => {
    for (const [side, other] of routes) tryRun('ip', ['-n', ns(side), 'route', 'del', `${address(other)}/32`, 'via', address('s')]);
  });
}

/** Cuts a namespace off from everything: its bridge port down. Undone by the returned function, or when the file ends. */
export function cutOff(name: Member): () => void {
  run('ip', ['-n', hub, 'link', 'set', bridgePort(name), 'down']);
  return undoOnExit(() => tryRun('ip', ['-n', hub, 'link', 'set', bridgePort(name), 'up']));
}

export interface Answer {
  to: Name;
  startedAt: number;
  endedAt: number;
  status: number;
  location?: string;
  error?: string;
  /** The answer's body, for a request with a method. */
  body?: string;
}

export interface ClientRequest {
  method: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
}

export interface Client {
  /** GET `path` on `to`; with `request`, that method, headers and body. A request idle `timeoutMs` (5 s) ends with status 0. */
  send(to: Name, path: string, request?: ClientRequest): Promise<Answer>;
  stop(): void;
}

/** A client in the fifth namespace: one request per line on stdin, one answer per line on stdout; each answer is also pushed to `answers`. */
export function startClient(answers: Answer[]): Client {
  const script = `
    const http = require('node:http');
    require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
      const { id, url, method, headers, body, timeoutMs = 5000 } = JSON.parse(line);
      const reply = (fields) => process.stdout.write(JSON.stringify({ id, ...fields }) + '\\n');
      const request = http.request(url, { method: method ?? 'GET', headers, agent: false, timeout: timeoutMs }, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk) => (text += chunk));
        response.on('end', () => reply({ status: response.statusCode, location: response.headers.location, ...(method ? { body: text } : {}) }));
      });
      request.end(body);
      request.on('timeout', () => request.destroy(new Error('no answer within ' + timeoutMs + ' ms')));
      request.on('error', (error) => reply({ status: 0, error: error.message }));
    });`;
  const child = spawn('ip', ['netns', 'exec', ns('x'), process.execPath, '-e', script], { detached: true, stdio: ['pipe', 'pipe', 'inherit'] });
  killOnExit(child.pid);
  const waiting = new Map<number, (fields: { status: number; location?: string; error?: string; body?: string }) => void>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const { id, ...fields } = JSON.parse(line) as { id: number; status: number };
    waiting.get(id)?.(fields);
    waiting.delete(id);
  });
  let next = 1;
  return {
    send(to: Name, path: string, request?: ClientRequest): Promise<Answer> {
      const id = next++;
      const startedAt = Date.now();
      return new Promise((resolve) => {
        waiting.set(id, (fields) => {
          const answer = { to, startedAt, endedAt: Date.now(), ...fields };
          answers.push(answer);
          resolve(answer);
        });
        child.stdin!.write(`${JSON.stringify({ id, url: `${urlOf(to)}${path}`, ...request })}\n`);
      });
    },
    stop: () => child.kill('SIGKILL'),
  };
}

/** The mesh fixture server in `name`'s namespace with `config` (as given: no budgets added), once its worker is ready. */
export async function startInNamespace(name: Name, config: Record<string, unknown>): Promise<ServerProcess> {
  const child = spawn('ip', ['netns', 'exec', ns(name), process.execPath, MESH_FIXTURE], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...cleanEnv(), FIXTURE_CONFIG: JSON.stringify(config) },
  });
  killOnExit(child.pid);
  const server = new ServerProcess(child);
  server.port = (await server.waitFor((event) => event.event === 'started', 60_000)).port as number;
  await server.readyWorkers(1, 0, 60_000);
  return server;
}

/** GET `path` on every server every `everyMs` until stopped; the returned function resolves once every answer is in. */
export function load(client: Client, path = '/whoami', everyMs = 100): () => Promise<void> {
  const pending = new Set<Promise<Answer>>();
  const timer = setInterval(() => {
    for (const name of names) {
      const sent = client.send(name, path);
      pending.add(sent);
      void sent.then(() => pending.delete(sent));
    }
  }, everyMs);
  return async () => {
    clearInterval(timer);
    await Promise.all([...pending]);
  };
}
