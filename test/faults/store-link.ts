import net from 'node:net';

/**
 * One server's network path to a store: a TCP relay on 127.0.0.1 in front of it that the test can cut, as a
 * partition between that server's host and the store would. Cut, every open connection is closed and new ones are
 * closed as they come (the server's store operations fail; its clock and its processes go on); restored, new
 * connections reach the store again. Other servers keep their own paths. Connections are closed, not reset
 * (RST): Node's `resetAndDestroy()` can leave a handle that keeps the test process from exiting.
 */
export class StoreLink {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async open(target: { host: string; port: number }): Promise<StoreLink> {
    let link: StoreLink | undefined;
    const server = net.createServer((client) => link!.relay(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    link = new StoreLink(server, (server.address() as net.AddressInfo).port);
    return link;
  }

  /** `url` (a connection string to the store) through this link. */
  url(url: string): string {
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  get isCut(): boolean {
    return this.cutOff;
  }

  cut(): void {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  restore(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private relay(client: net.Socket, target: { host: string; port: number }): void {
    if (this.cutOff) return void client.destroy();
    const upstream = net.connect(target.port, target.host);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.pipe(to);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }
}
