// The fleet's events, live over the server's WebSocket. Browsers cannot set headers on a WebSocket, so the
// key goes in the first frame: `{ method: "overview.subscribe", apikey }`. The socket reconnects by itself,
// with a growing delay, and says so.

const SUBSCRIBE_ID = 'overview-subscribe';

export class EventStream {
  /**
   * @param {string} key the platform key
   * @param {{ event(entry): void, state(state: 'connecting' | 'live' | 'reconnecting' | 'refused', detail?: string): void, opened(): void }} handlers
   */
  constructor(key, handlers) {
    this.key = key;
    this.handlers = handlers;
    this.attempt = 0;
    this.closed = false;
    this.socket = undefined;
    this.timer = undefined;
  }

  start() {
    this.connect();
  }

  stop() {
    this.closed = true;
    clearTimeout(this.timer);
    this.socket?.close(1000, 'signed out');
  }

  connect() {
    if (this.closed) return;
    this.handlers.state(this.attempt === 0 ? 'connecting' : 'reconnecting');
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.addEventListener('open', () => socket.send(JSON.stringify({ requestId: SUBSCRIBE_ID, method: 'overview.subscribe', apikey: this.key })));
    socket.addEventListener('message', (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.id === SUBSCRIBE_ID) {
        if (frame.ok) {
          this.attempt = 0;
          this.handlers.state('live');
          this.handlers.opened();
        } else {
          this.handlers.state('refused', frame.error?.message ?? 'the event stream was refused');
          this.closed = true;
          socket.close(1000, 'refused');
        }
        return;
      }
      if (frame.event === 'overview.event' && frame.data) this.handlers.event(frame.data);
    });
    socket.addEventListener('close', () => {
      if (this.socket !== socket || this.closed) return;
      this.attempt += 1;
      this.handlers.state('reconnecting');
      const delay = Math.min(10_000, 500 * 2 ** Math.min(this.attempt - 1, 5)) + Math.random() * 250;
      this.timer = setTimeout(() => this.connect(), delay);
    });
  }
}
