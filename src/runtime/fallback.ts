import { createServer as createHttpServer, type IncomingMessage, type ServerResponse, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { errorBody } from '../errors.js';
import { armConnectionChecks } from './served-app.js';
import { duplicatedHeader, duplicateHeaderMessage } from '../http/duplicate-headers.js';
import { answerClientError } from '../http/raw-errors.js';
import { REQUEST_ID_HEADER, requestIdFor } from '../http/request-id.js';
import { FLEETPLANE_VERSION } from '../version.js';

export interface FallbackOptions {
  serverId: string;
  /** `fallback.redirect`: the load balancer's base URL. */
  redirect?: string;
  retryAfterS: number;
  status: () => string;
  tls?: { key: Buffer; cert: Buffer };
  onAnswer?: (status: number) => void;
}

/**
 * Whether the primary answers this request itself while no worker serves: `POST /control`, `GET /metrics`, and
 * the dashboard (`GET /dashboard` and its assets), so an operator sees and steers a node whose workers all left.
 */
export function servedByPrimary(request: IncomingMessage): boolean {
  const path = request.url?.split('?')[0];
  if (request.method === 'POST') return path === '/control';
  return request.method === 'GET' && (path === '/metrics' || path === '/dashboard' || path?.startsWith('/dashboard/assets/') === true);
}

/** What the fallback serves besides its own answers, known once the server is built. */
export interface FallbackSurface {
  /** A running mesh peer's public URL, when there is one. */
  peerUrl?: () => string | undefined;
  /** Requests the primary still serves itself in fallback (`POST /control`, `GET /metrics`). */
  fallbackRoutes?: (request: IncomingMessage, response: ServerResponse) => boolean;
}

/**
 * SPEC 1.3: the answer the primary gives itself when no worker takes traffic. Load balancers get a 307 to
 * another entry point (or 503 when there is none), `/readyz` says 503 so they take this node out, and
 * `/healthz` stays 200 while the primary lives; `GET /metrics` is served here too (through `fallbackRoutes`), never
 * redirected. Every answer closes its connection, so the client comes
 * back through the balancer once workers serve again.
 */
export class FallbackResponder {
  readonly http: HttpServer;
  readonly https?: HttpsServer;

  private surface: FallbackSurface = {};

  constructor(private readonly options: FallbackOptions) {
    const handler = (request: IncomingMessage, response: ServerResponse) => this.answer(request, response);
    this.http = createHttpServer(handler);
    if (options.tls) this.https = createHttpsServer(options.tls, handler);
    for (const server of [this.http, this.https]) {
      if (!server) continue;
      server.keepAliveTimeout = 1;
      server.headersTimeout = 10_000;
      server.requestTimeout = 15_000;
      server.on('clientError', answerClientError);
      // Never listening itself, the fallback would otherwise apply neither timeout.
      armConnectionChecks(server);
    }
  }

  serve(socket: Socket, secure: boolean): void {
    const server = secure && this.https ? this.https : this.http;
    server.emit('connection', socket);
    socket.resume();
  }

  /** Given before the ports are bound: the peer to redirect to and the routes served here. */
  serveAlso(surface: FallbackSurface): void {
    this.surface = surface;
  }

  target(): string | undefined {
    return this.options.redirect ?? this.surface.peerUrl?.();
  }

  private answer(request: IncomingMessage, response: ServerResponse): void {
    response.shouldKeepAlive = false;
    // As the workers do: the caller's valid X-Request-Id back, else a fresh one to quote.
    response.setHeader(REQUEST_ID_HEADER, requestIdFor(request));
    const duplicated = duplicatedHeader(request.rawHeaders);
    if (duplicated) return this.json(response, 400, errorBody('duplicate_header', duplicateHeaderMessage(duplicated)));
    const path = (request.url ?? '/').split('?')[0];
    if (request.method === 'GET' && (path === '/healthz' || path === '/readyz')) {
      const ready = path === '/healthz';
      return this.json(response, ready ? 200 : 503, { status: ready ? this.options.status() : 'fallback', server: this.options.serverId, worker: 0, version: FLEETPLANE_VERSION });
    }
    if (this.surface.fallbackRoutes?.(request, response)) return;
    if (request.method === 'GET' && path === '/metrics') {
      // Metrics are never redirected: a scraper following a 307 would file another node's series under this one.
      return this.json(response, 503, errorBody('unavailable', 'metrics are not served by this primary while no worker serves'));
    }
    const base = this.target();
    if (base) {
      const location = base.replace(/\/+$/, '') + (request.url?.startsWith('/') ? request.url : `/${request.url ?? ''}`);
      this.options.onAnswer?.(307);
      response.writeHead(307, { Location: location, 'Cache-Control': 'no-store', Connection: 'close', 'Content-Length': '0' });
      response.end();
      return;
    }
    response.setHeader('Retry-After', String(this.options.retryAfterS));
    this.options.onAnswer?.(503);
    this.json(response, 503, errorBody('unavailable', 'no worker is serving on this node; retry later'));
  }

  private json(response: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(text),
      'Cache-Control': 'no-store',
      Connection: 'close',
    });
    response.end(text);
  }
}
