import { createServer as createHttpServer, STATUS_CODES, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { WebSocketServer, WebSocket } from 'ws';
import { ws } from './ws.js';
import type { Logger } from '../logging/logger.js';
import type { MeshEvents } from './events.js';
import type { MeshTls } from './settings.js';

export type UpgradeVerdict<T> = { ok: true; value: T; headers: string[] } | { ok: false; status: number; reason: string; peer?: string };

export interface ListenerOptions<T> {
  host: string;
  port: number;
  tls?: MeshTls;
  maxPayload: number;
  log: Logger;
  /** Decides on an upgrade request before any WebSocket exists. */
  authorize(request: IncomingMessage): UpgradeVerdict<T>;
  /** An accepted socket, with what `authorize` returned for it. */
  accepted(ws: WebSocket, value: T, socket: Duplex): void;
  refused(...details: MeshEvents['refused']): void;
}

/**
 * The mesh port: WebSocket upgrades only, each authorized before the handshake completes (a refusal is an
 * HTTP error status, so no unauthenticated socket ever exists). With TLS files, peers must present a
 * certificate signed by the configured CA (mutual TLS).
 */
export class MeshListener<T> {
  private readonly server: HttpServer;
  private readonly wss: WebSocketServer;
  private readonly answers = new WeakMap<IncomingMessage, string[]>();
  private readonly sockets = new Set<Socket>();

  constructor(private readonly options: ListenerOptions<T>) {
    const { tls, log } = options;
    this.server = tls ? createHttpsServer({ key: tls.key, cert: tls.cert, ca: tls.ca, requestCert: true, rejectUnauthorized: true }) : createHttpServer();
    this.server.headersTimeout = 10_000;
    this.server.requestTimeout = 10_000;
    this.wss = new (ws().WebSocketServer)({ noServer: true, perMessageDeflate: false, maxPayload: options.maxPayload, clientTracking: false });
    this.wss.on('headers', (headers, request) => headers.push(...(this.answers.get(request) ?? [])));
    this.server.on('request', (_request, response) => {
      response.writeHead(426, { Connection: 'close', 'Content-Type': 'text/plain' });
      response.end('mesh port: WebSocket peers only\n');
    });
    this.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(request, socket, head));
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.server.on('tlsClientError', (error, socket) => {
      log.warn({ remote: socket.remoteAddress, reason: error.message }, 'mesh TLS handshake refused');
      options.refused({ status: 0, reason: `tls: ${error.message}`, remote: socket.remoteAddress });
    });
  }

  /** New TLS material for the next handshakes; links already open keep theirs. */
  setSecureContext(tls: MeshTls): void {
    (this.server as import('node:https').Server).setSecureContext({ key: tls.key, cert: tls.cert, ca: tls.ca });
  }

  /** Binds the mesh port, or listens on `inherited`, the mesh socket a hand-over passed (SPEC 1.10). */
  listen(inherited?: unknown): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      const listening = () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      };
      if (inherited) this.server.listen(inherited as HttpServer, listening);
      else this.server.listen(this.options.port, this.options.host, listening);
    });
  }

  /** The listening socket, to pass to the next primary in a hand-over. */
  get socket(): { host: string; port: number; handle: unknown } | undefined {
    const address = this.server.address() as AddressInfo | null;
    const handle = (this.server as unknown as { _handle?: unknown })._handle;
    return address && handle ? { host: address.address, port: address.port, handle } : undefined;
  }

  /** Stops accepting and drops sockets that never became links (links are closed by their owner). */
  close(): void {
    this.server.close();
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  private upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    const remote = request.socket.remoteAddress;
    let verdict: UpgradeVerdict<T>;
    try {
      verdict = this.options.authorize(request);
    } catch (error) {
      this.options.log.error({ err: error }, 'mesh handshake check failed');
      verdict = { ok: false, status: 500, reason: 'handshake check failed' };
    }
    if (!verdict.ok) {
      this.options.log.warn({ peer: verdict.peer, remote, status: verdict.status, reason: verdict.reason }, 'mesh handshake refused');
      this.options.refused({ status: verdict.status, reason: verdict.reason, peer: verdict.peer, remote });
      const text = `${verdict.reason}\n`;
      socket.end(`HTTP/1.1 ${verdict.status} ${STATUS_CODES[verdict.status] ?? 'Refused'}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
      return;
    }
    const { value, headers } = verdict;
    this.answers.set(request, headers);
    this.wss.handleUpgrade(request, socket, head, (ws) => {
      this.sockets.delete(request.socket);
      this.options.accepted(ws, value, socket);
    });
  }
}
