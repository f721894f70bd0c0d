import net, { type Server as NetServer, type Socket } from 'node:net';

export class ListenError extends Error {
  override readonly name = 'ListenError';
}

/**
 * The public listening sockets, owned by the primary. Accepted connections stay paused (no byte read) until
 * a worker or the fallback takes them, so handing a socket over never loses request data.
 */
export class Listeners {
  private readonly servers: NetServer[] = [];

  constructor(private readonly onConnection: (socket: Socket, secure: boolean) => void) {}

  async listen(port: number, host: string, secure: boolean): Promise<number> {
    const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => this.onConnection(socket, secure));
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) => {
        const what = `${secure ? 'https' : 'http'}.port ${port} on ${host}`;
        if (error.code === 'EADDRINUSE') reject(new ListenError(`${what} is already in use`));
        else if (error.code === 'EACCES') reject(new ListenError(`${what}: permission denied`));
        else reject(new ListenError(`cannot listen on ${what}: ${error.message}`));
      });
      server.listen({ port, host, backlog: 4096 }, resolve);
    });
    server.on('error', () => {});
    this.servers.push(server);
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
