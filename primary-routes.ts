import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody } from './src/errors.js';
import { servedByPrimary } from './src/runtime/fallback.js';

/** Requests the primary answers itself while no worker serves; false for the rest. */
export type PrimaryRoutes = (request: IncomingMessage, response: ServerResponse) => boolean;

/**
 * The primary's own `POST /control` and `GET /metrics`, answered only while no worker serves. What answers them
 * (`build`: the control surface of the HTTP application) is built on the first such request, so a primary whose
 * workers serve never loads the HTTP layer; requests wait for it with their bodies unread. A build that fails
 * is logged, answers 503 `unavailable`, and is tried again on the next request.
 */
export function primaryRoutesOnDemand(build: () => Promise<PrimaryRoutes>, log: { error(fields: object, message: string): void }): PrimaryRoutes {
  let routes: Promise<PrimaryRoutes> | undefined;
  return (request, response) => {
    if (!servedByPrimary(request)) return false;
    const building = (routes ??= build());
    building.then(
      (route) => route(request, response),
      (error: unknown) => {
        if (routes === building) routes = undefined;
        log.error({ err: error }, 'the primary could not build its control routes');
        const text = JSON.stringify(errorBody('unavailable', 'the control routes of this primary are not available; retry later'));
        response.writeHead(503, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store', Connection: 'close' });
        response.end(text);
      },
    );
    return true;
  };
}
