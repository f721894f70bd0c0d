import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { rawErrorResponse } from '../http/raw-errors.js';

const TIMED_OUT = rawErrorResponse(408, 'request_timeout', 'the request body was not received in time');
const EVICTED = rawErrorResponse(408, 'request_timeout', 'too many connections from this address are still sending their request body');

export interface IncompleteBodiesLimits {
  /** Longest a request body may take to arrive once its headers have; 0 = no limit. */
  timeoutMs: number;
  /** Requests of one address whose body is still arriving; 0 = no cap. */
  maxPerAddress: number;
  /** Addresses never capped (trusted proxies: every client behind them shares their address). */
  exempt(address: string): boolean;
}

/** A request whose body had not all arrived when its headers were parsed. */
interface Arriving {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  readonly socket: Socket;
  address?: string;
  timer?: NodeJS.Timeout;
  done: boolean;
}

/**
 * Ends the connection of a request we stop waiting for, as Node ends its own timeouts: `answer` first, unless
 * the app has answered this request already or begun to (it may refuse one before reading the body), or another
 * request's answer is still on its way on the connection: a second answer would corrupt or follow it.
 */
function close(entry: Arriving, answer: string): void {
  const { socket, response } = entry;
  if (socket.destroyed) return;
  const onItsWay = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && onItsWay === response && !response.headersSent) socket.write(answer);
  socket.destroy();
}

/**
 * The slow-body bound of one process, next to `IncompleteHeaders`: a request whose body has not all arrived
 * `timeoutMs` after its headers is answered 408 and its connection closed, and one client address holds at most
 * `maxPerAddress` such requests (past it the oldest goes, as for headers). Node's own `requestTimeout` (300 s)
 * would otherwise be the only bound on a body dripped a byte at a time.
 *
 * Most bodies arrive with their headers, and those cost no timer: Node emits 'request' while the parser is
 * still inside the bytes it read, so whether the body is complete is known only once that read is parsed. The
 * requests of a turn of the event loop are looked at together when it ends (one `setImmediate` per turn), and
 * only those still incomplete are tracked.
 */
export class IncompleteBodies {
  private readonly byAddress = new Map<string, Set<Arriving>>();
  /** Requests and their responses, in pairs, handed over since the last look. */
  private parsed: Array<IncomingMessage | ServerResponse> = [];
  private looking = false;

  constructor(private readonly limits: IncompleteBodiesLimits) {}

  /** Requests of one address whose body is still arriving. */
  count(address: string): number {
    return this.byAddress.get(address)?.size ?? 0;
  }

  track(server: HttpServer): void {
    if (this.limits.timeoutMs <= 0 && this.limits.maxPerAddress <= 0) return;
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      this.parsed.push(request, response);
      if (this.looking) return;
      this.looking = true;
      setImmediate(this.lookAtParsed);
    });
  }

  private readonly lookAtParsed = (): void => {
    this.looking = false;
    const parsed = this.parsed;
    this.parsed = [];
    for (let i = 0; i < parsed.length; i += 2) {
      const request = parsed[i] as IncomingMessage;
      if (!request.complete && !request.socket.destroyed) this.arriving(request, parsed[i + 1] as ServerResponse);
    }
  };

  private arriving(request: IncomingMessage, response: ServerResponse): void {
    const entry: Arriving = { request, response, socket: request.socket as Socket, done: false };
    const arrived = () => this.forget(entry);
    // 'end' once the body is read (by the app, or dumped by Node after the answer); 'close' if the socket goes.
    request.once('end', arrived);
    request.once('close', arrived);
    if (this.limits.timeoutMs > 0) {
      entry.timer = setTimeout(() => this.expire(entry), this.limits.timeoutMs);
      entry.timer.unref();
    }
    const address = entry.socket.remoteAddress;
    if (this.limits.maxPerAddress <= 0 || address === undefined || this.limits.exempt(address)) return;
    entry.address = address;
    let pending = this.byAddress.get(address);
    if (!pending) this.byAddress.set(address, (pending = new Set()));
    pending.add(entry);
    while (pending.size > this.limits.maxPerAddress) {
      const oldest: Arriving = pending.values().next().value!;
      this.forget(oldest);
      // A body that has arrived while the app has not read it yet holds no slot worth taking back.
      if (!oldest.request.complete) close(oldest, EVICTED);
    }
  }

  private expire(entry: Arriving): void {
    this.forget(entry);
    if (!entry.request.complete) close(entry, TIMED_OUT);
  }

  private forget(entry: Arriving): void {
    if (entry.done) return;
    entry.done = true;
    clearTimeout(entry.timer);
    if (entry.address === undefined) return;
    const pending = this.byAddress.get(entry.address);
    if (!pending) return;
    pending.delete(entry);
    if (pending.size === 0) this.byAddress.delete(entry.address);
  }
}
