import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';

/**
 * How often Node's connection check runs on a server that serves handed-over connections (its own default,
 * 30 s, would let a slow client keep its socket up to 30 s past `http.headersTimeoutMs`). The check walks a
 * list kept in C++; once a second costs nothing measurable.
 */
export const CONNECTIONS_CHECK_MS = 1_000;

/**
 * Node arms the headers and request timeouts and its connection tracking on 'listening'; servers that never
 * listen (the primary hands them sockets) are armed here, or slow clients could hold sockets forever.
 */
export function armConnectionChecks(server: HttpServer | HttpsServer): void {
  // A constructor option in Node's typings; the property it is stored in is what 'listening' reads.
  (server as { connectionsCheckingInterval?: number }).connectionsCheckingInterval = CONNECTIONS_CHECK_MS;
  server.emit('listening');
}

/**
 * What a worker (or the primary in single-process mode) serves: HTTP servers that never listen themselves —
 * the primary hands them accepted connections — and a way to close the application.
 */
export interface ServedApp {
  http: HttpServer;
  https?: HttpsServer;
  close(): Promise<void>;
}
