import net, { type Server as NetServer, type Socket } from 'node:net';

const BACKLOG = 4096;

export class ListenError extends Error {
  override readonly name = 'ListenError';

  /** A port that cannot be bound, as one line naming the setting and the port (`http.port 8080 on 0.0.0.0 …`). */
  static of(what: string, error: NodeJS.ErrnoException): ListenError {
    if (error.code === 'EADDRINUSE') return new ListenError(`${what} is already in use`, { cause: error });
    if (error.code === 'EACCES') return new ListenError(`${what}: permission denied`, { cause: error });
    return new ListenError(`cannot listen on ${what}: ${error.message}`, { cause: error });
  }
}

/**
 * An accepted TCP connection as the operating system handed it over: nothing read from it yet, no stream
 * around it. It is what the primary passes to a worker (as Node's cluster round-robin does), and becomes a
 * `Socket` only where it is served.
 */
export interface ConnectionHandle {
  close(callback?: () => void): void;
}

interface ListeningHandle {
  onconnection: (status: number, handle?: ConnectionHandle) => void;
}

/** A `Socket` over an accepted connection, for serving it in this process. */
export function socketOf(handle: ConnectionHandle | Socket): Socket {
  if (handle instanceof net.Socket) return handle;
  // `handle` is a documented-by-use option of net.Socket (Node's own cluster and child_process pass it).
  const socket = new net.Socket({ handle, readable: true, writable: true } as net.SocketConstructorOpts);
  socket.setNoDelay(true);
  return socket;
}

/** A connection this process serves itself; a client's reset must not become an unhandled error. */
export function servedHere(handle: ConnectionHandle): Socket {
  const socket = socketOf(handle);
  socket.on('error', () => {});
  return socket;
}

/**
 * The public listening sockets, owned by the primary. An accepted connection is taken as its raw handle: no
 * `Socket` is built in the primary for a connection a worker serves (that cost as much as the rest of the
 * hand-off), and no byte is read before a worker or the fallback takes it, so no request data is lost.
 */
export class Listeners {
  private readonly servers: NetServer[] = [];

  constructor(private readonly onConnection: (handle: ConnectionHandle, secure: boolean) => void) {}

  async listen(port: number, host: string, secure: boolean): Promise<number> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) => {
        reject(ListenError.of(`${secure ? 'https' : 'http'}.port ${port} on ${host}`, error));
      });
      server.listen({ port, host, backlog: BACKLOG }, resolve);
    });
    return this.take(server, secure, port);
  }

  /**
   * Hand-over (SPEC 1.10): listens on a socket another primary passed over IPC, already bound and listening.
   * Connections are taken from the moment this returns, with no bind in between: the kernel's accept queue
   * is shared, so nothing waiting in it is lost.
   */
  adopt(handle: unknown, secure: boolean): number {
    const server = net.createServer();
    // A TCP handle is listened on synchronously: accepted connections only reach it once this tick is over.
    server.listen(handle as net.Server, BACKLOG);
    return this.take(server, secure, 0);
  }

  /** Hand-over: the listening handles, to pass to the next primary (this process keeps its own until `close`). */
  handles(): Array<{ secure: boolean; handle: unknown; host: string; port: number }> {
    return this.servers.map((server) => {
      const { address, port } = server.address() as net.AddressInfo;
      return { secure: this.secure.get(server) ?? false, handle: (server as unknown as { _handle: unknown })._handle, host: address, port };
    });
  }

  private readonly secure = new WeakMap<NetServer, boolean>();

  private take(server: NetServer, secure: boolean, port: number): number {
    server.on('error', () => {});
    // What Node's cluster does for its round-robin: take the listening handle's accepted connections directly.
    const listening = (server as unknown as { _handle?: Partial<ListeningHandle> })._handle;
    if (typeof listening?.onconnection !== 'function') {
      server.close();
      throw new ListenError(`cannot take connections on ${secure ? 'https' : 'http'}.port ${port}: this Node.js version does not expose accepted handles`);
    }
    listening.onconnection = (status, handle) => {
      // A failed accept (e.g. out of file descriptors) has no connection to serve.
      if (status === 0 && handle) this.onConnection(handle, secure);
    };
    this.servers.push(server);
    this.secure.set(server, secure);
    return (server.address() as net.AddressInfo).port;
  }

  /**
   * Stops listening. The port is released at once; we do not wait for the 'close' event, because a server
   * that handed sockets to child processes waits for each child to confirm its sockets closed, and a worker
   * that already exited never answers.
   */
  close(): void {
    for (const server of this.servers.splice(0)) server.close();
  }
}
