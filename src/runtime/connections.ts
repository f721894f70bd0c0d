import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

interface Tracked {
  /** The connection's latest response; once it has finished, the connection is idle (see `idleSince`). */
  response?: ServerResponse;
  /** When the connection was seen idle first: its opening, or the first look after its latest response finished. */
  idleSince: number;
  /** Taken over by another protocol (WebSocket): its owner closes it, with its own close code. */
  upgraded?: boolean;
}

/**
 * The connections of one process's HTTP servers, with what each is doing. Draining needs to know which
 * sockets are idle (closable) and which have a response in flight (told `Connection: close`), and Node's
 * own tracking is only armed for servers that `listen()`, which ours never do.
 */
export class ConnectionTracker {
  private readonly sockets = new Map<Socket, Tracked>();
  private closing = false;

  track(server: HttpServer): void {
    server.on('connection', (socket: Socket) => {
      this.sockets.set(socket, { idleSince: Date.now() });
      socket.once('close', () => this.sockets.delete(socket));
    });
    server.prependListener('upgrade', (request: IncomingMessage) => {
      const tracked = this.sockets.get(request.socket as Socket);
      if (tracked) tracked.upgraded = true;
    });
    // Runs before the application's handler, so a draining worker's answer already says `Connection: close`.
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
      const tracked = this.sockets.get(request.socket as Socket);
      if (this.closing) response.shouldKeepAlive = false;
      // No listener per response: whether it has finished is read when it matters (`closeIdle`).
      if (tracked) tracked.response = response;
    });
  }

  get size(): number {
    return this.sockets.size;
  }

  get draining(): boolean {
    return this.closing;
  }

  /** From now on every response closes its connection; responses still being written are told too. */
  beginClosing(): void {
    this.closing = true;
    for (const tracked of this.sockets.values()) {
      if (tracked.response && !tracked.response.headersSent) tracked.response.shouldKeepAlive = false;
    }
  }

  stopClosing(): void {
    this.closing = false;
  }

  /**
   * Closes sockets idle for at least `minIdleMs`. A keep-alive client may be writing its next request into a
   * socket the moment we close it; waiting a little makes that race rare, and a busy socket is instead
   * closed after its next response.
   */
  closeIdle(minIdleMs: number, now = Date.now()): void {
    for (const [socket, tracked] of this.sockets) {
      if (tracked.response?.writableFinished) {
        // Idle from this look on: a connection closes `minIdleMs` after it was first seen idle, never sooner
        // after its response than that.
        tracked.response = undefined;
        tracked.idleSince = now;
      }
      if (!tracked.response && !tracked.upgraded && now - tracked.idleSince >= minIdleMs) socket.end();
    }
  }

  destroyAll(): void {
    for (const socket of this.sockets.keys()) socket.destroy();
  }

  /**
   * Resolves when every connection is gone or `timeoutMs` passes; true when all closed in time.
   *
   * Timers run before the loop reads its sockets, so a socket idle by the clock may hold a request that arrived
   * since the last read; closing it would drop that request unanswered. So idle sockets are closed after this
   * turn's reads (from the check phase, where a request that arrived is already being answered), and only on a
   * poll that came on time: after a stall (this process starved of CPU, a long garbage collection) the next
   * poll decides instead.
   */
  async drain(timeoutMs: number, minIdleMs = 250, pollMs = 50): Promise<boolean> {
    this.beginClosing();
    const deadline = Date.now() + timeoutMs;
    let previousPoll: number | undefined;
    while (this.sockets.size > 0 && Date.now() < deadline) {
      const now = Date.now();
      if (previousPoll !== undefined && now - previousPoll <= 2 * pollMs) {
        await new Promise((resolve) => setImmediate(resolve));
        this.closeIdle(minIdleMs);
      }
      previousPoll = now;
      await new Promise((resolve) => setTimeout(resolve, pollMs).unref());
    }
    return this.sockets.size === 0;
  }
}
