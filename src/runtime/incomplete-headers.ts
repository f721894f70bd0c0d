import type { Server as HttpServer, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { rawErrorResponse } from '../http/raw-errors.js';

const EVICTED = rawErrorResponse(408, 'request_timeout', 'too many connections from this address are still sending their request headers');

export interface IncompleteHeadersLimits {
  /** Connections of one address still sending their first request headers; 0 = no cap. */
  maxPerAddress: number;
  /** Addresses never capped (trusted proxies: every client behind them shares their address). */
  exempt(address: string): boolean;
}

/**
 * The slow-client bound of one process: Node's `headersTimeout` ends a connection that has not sent its
 * headers in time (408), and this caps how many such connections one client address holds meanwhile. Past the
 * cap the oldest is answered 408 and closed, rather than the newest refused: a client sending its headers at
 * once still gets in while a slow one drips bytes into many sockets.
 */
export class IncompleteHeaders {
  private readonly byAddress = new Map<string, Set<Socket>>();
  private readonly addressOf = new WeakMap<Socket, string>();

  constructor(private readonly limits: IncompleteHeadersLimits) {}

  /** Connections of one address that have not completed their first request headers. */
  count(address: string): number {
    return this.byAddress.get(address)?.size ?? 0;
  }

  track(server: HttpServer): void {
    if (this.limits.maxPerAddress <= 0) return;
    server.on('connection', (socket: Socket) => this.opened(socket));
    const complete = (request: IncomingMessage) => this.forget(request.socket as Socket);
    server.prependListener('request', complete);
    server.prependListener('upgrade', complete);
  }

  private opened(socket: Socket): void {
    const address = socket.remoteAddress;
    if (address === undefined || this.limits.exempt(address)) return;
    let pending = this.byAddress.get(address);
    if (!pending) this.byAddress.set(address, (pending = new Set()));
    pending.add(socket);
    this.addressOf.set(socket, address);
    socket.once('close', () => this.forget(socket));
    if (pending.size <= this.limits.maxPerAddress) return;
    const oldest = pending.values().next().value!;
    this.forget(oldest);
    // As Node answers its own request timeout: the answer, then the socket is gone.
    if (oldest.writable) oldest.write(EVICTED);
    oldest.destroy();
  }

  private forget(socket: Socket): void {
    const address = this.addressOf.get(socket);
    if (address === undefined) return;
    this.addressOf.delete(socket);
    const pending = this.byAddress.get(address);
    if (!pending) return;
    pending.delete(socket);
    if (pending.size === 0) this.byAddress.delete(address);
  }
}
