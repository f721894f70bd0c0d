import net from 'node:net';
import { chmodSync, renameSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../logging/logger.js';
import { IpcError } from '../ipc/envelope.js';
import { internalViolation } from '../auth/authority.js';
import type { RequestResult } from '../ipc/handlers.js';

export const CONTROL_SOCKET = 'control.sock';
const MAX_LINE_BYTES = 2 * 1024 * 1024;

export interface ControlRequest {
  envelope: unknown;
  timeoutMs?: number;
}

export type ControlResponse = { ok: true; result: RequestResult } | { ok: false; error: { code: string; message: string; status: number } };

export const controlSocketPath = (dataDir: string) => path.join(dataDir, CONTROL_SOCKET);

/** Start refused: the data directory belongs to a server that is running. */
export class ServerRunningError extends Error {
  override readonly name = 'ServerRunningError';
}

/** True when something answers on the socket (a running server), false when it is stale or absent. */
function socketAnswers(file: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(file);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

/** Refuses a start on the data directory of a server that runs: its control socket answers. */
export async function refuseRunningServer(dataDir: string): Promise<void> {
  const file = controlSocketPath(dataDir);
  if (await socketAnswers(file)) throw new ServerRunningError(`another server is running with this data directory (${file} answers)`);
}

/**
 * The primary's local control socket: one JSON request per line, one JSON answer per line. The socket file
 * is mode 0600 in the data directory, so the file system decides who may steer this server — as with the
 * local daemons of other process managers — and no key is involved.
 */
export async function listenControlSocket(dataDir: string, log: Logger, request: ControlHandler): Promise<net.Server> {
  const file = controlSocketPath(dataDir);
  await refuseRunningServer(dataDir);
  try {
    unlinkSync(file);
  } catch {
    // no stale socket
  }
  return bind(controlServer(log, request), file);
}

/**
 * Hand-over (SPEC 1.10): the new primary takes the control socket of the old one, which still answers on it.
 * It listens on a file of its own and renames it over `control.sock`: the name never points at nothing, the
 * requests the old primary accepted are answered by it, and every later one reaches the new primary. The old
 * primary's socket, no longer named, gets no new connection; it must not close it (closing a Unix socket
 * server unlinks its path, which is the new primary's now) and leaves it to its exit.
 */
export async function takeOverControlSocket(dataDir: string, log: Logger, request: ControlHandler): Promise<net.Server> {
  const file = controlSocketPath(dataDir);
  const own = `${file}.${process.pid}`;
  try {
    unlinkSync(own);
  } catch {
    // none left by an earlier process with this pid
  }
  const server = await bind(controlServer(log, request), own);
  renameSync(own, file);
  return server;
}

type ControlHandler = (envelope: unknown, timeoutMs?: number) => Promise<RequestResult>;

/**
 * The primary's control socket over its life: opened at boot, or, for a primary started by a hand-over, taken
 * over from the old one once this primary serves (`takeOver`); released at shutdown with the pid file (`release`)
 * unless it was handed over (`handedOver`), when the socket file and the pid file are the new primary's.
 */
export class ControlSocket {
  private server: net.Server | undefined;
  private handed = false;

  private constructor(
    private readonly dataDir: string,
    private readonly log: Logger,
    private readonly request: ControlHandler,
    private readonly onRelease: () => void,
  ) {}

  /** `deferred`: a hand-over's new primary, which takes the socket over later. `onRelease` runs with `release`. */
  static async open(options: { dataDir: string; log: Logger; request: ControlHandler; deferred: boolean; onRelease: () => void }): Promise<ControlSocket> {
    const socket = new ControlSocket(options.dataDir, options.log, options.request, options.onRelease);
    if (!options.deferred) socket.server = await listenControlSocket(options.dataDir, options.log, options.request);
    return socket;
  }

  async takeOver(): Promise<void> {
    this.server = await takeOverControlSocket(this.dataDir, this.log, this.request);
  }

  /** This server handed over: the names are the new primary's. Its socket stays open, unnamed, until exit. */
  handedOver(): void {
    this.handed = true;
  }

  /**
   * Closes the socket and removes its file (`onRelease` too). After a hand-over, nothing: closing a Unix socket
   * server unlinks its path, which is the new primary's now.
   */
  release(): void {
    if (this.handed) return;
    this.server?.close();
    this.onRelease();
    try {
      unlinkSync(controlSocketPath(this.dataDir));
    } catch {
      // already gone
    }
  }
}


function controlServer(log: Logger, request: ControlHandler): net.Server {
  const server = net.createServer((socket) => {
    let buffered = '';
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      if (buffered.length > MAX_LINE_BYTES) {
        socket.end(`${JSON.stringify({ ok: false, error: { code: 'too_large', message: 'request line too large', status: 413 } })}\n`);
        return;
      }
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        void answer(line).then((response) => socket.write(`${JSON.stringify(response)}\n`));
      }
    });
  });
  const answer = async (line: string): Promise<ControlResponse> => {
    try {
      let parsed: ControlRequest;
      try {
        parsed = JSON.parse(line) as ControlRequest;
      } catch {
        throw new IpcError('bad_request', 'each request is one line of JSON: {"envelope": {...}}');
      }
      if (typeof parsed !== 'object' || parsed === null) throw new IpcError('bad_request', 'the request must be a JSON object');
      const timeoutMs = typeof parsed.timeoutMs === 'number' && parsed.timeoutMs > 0 ? Math.min(parsed.timeoutMs, 120_000) : undefined;
      const envelope = parsed.envelope as { method?: unknown } | undefined;
      log.info({ via: 'control socket', method: envelope?.method, target: envelope }, 'control request');
      // The file's permissions make an operator, not one of the server's processes: fake events are fake from them too.
      const internal = typeof envelope?.method === 'string' ? internalViolation(envelope.method) : undefined;
      if (internal) throw new IpcError('forbidden', internal);
      return { ok: true, result: await request(parsed.envelope, timeoutMs) };
    } catch (error) {
      if (error instanceof IpcError) return { ok: false, error: { code: error.code, message: error.message, status: error.statusCode } };
      log.error({ err: error }, 'control request failed');
      return { ok: false, error: { code: 'internal', message: 'internal error', status: 500 } };
    }
  };
  return server;
}

async function bind(server: net.Server, file: string): Promise<net.Server> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => resolve());
  });
  chmodSync(file, 0o600);
  server.unref();
  return server;
}

/** Sends one control request over the socket and resolves with the answer. */
export function callControlSocket(file: string, request: ControlRequest, timeoutMs: number): Promise<ControlResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(file);
    let buffered = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer from ${file} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      const newline = buffered.indexOf('\n');
      if (newline < 0) return;
      clearTimeout(timer);
      socket.end();
      try {
        resolve(JSON.parse(buffered.slice(0, newline)) as ControlResponse);
      } catch {
        reject(new Error('malformed answer from the control socket'));
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(error.code === 'ENOENT' || error.code === 'ECONNREFUSED' ? new Error(`no server is running with this data directory (${file})`) : error);
    });
  });
}
