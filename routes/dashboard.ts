import path from 'node:path';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { packageFacts } from '../src/package.js';
import { ASSET_PREFIX, loadDashboardAssets, type DashboardAssets } from '../src/overview/assets.js';
import { errorReply } from '../schemas/errors.js';
import { FleetplaneError, SHARED_CODES, errorCode, errorEntry } from '../src/errors.js';

/**
 * What the page may load and talk to: its own origin only, and nothing inline. `connect-src 'self'` covers
 * `POST /control` and the WebSocket on the same host.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const IMMUTABLE = 'public, max-age=31536000, immutable';

const AssetParams = Type.Object({
  version: Type.String({ maxLength: 64, description: 'The versioned prefix the page names (package version and content digest)' }),
  '*': Type.String({ maxLength: 256, description: 'The file below it' }),
});

/** The dashboard's two errors: a file it does not have (the router's `not_found`), and files it cannot read. */
const DASHBOARD_ERRORS = {
  notFound: errorEntry(errorCode('not_found', 404), (declared) => new FleetplaneError(declared.code, 'no such dashboard file', declared.statusCode)),
  unavailable: errorEntry(SHARED_CODES.unavailable, (declared) => new FleetplaneError(declared.code, 'the dashboard is not available on this server', declared.statusCode, { expose: true })),
};
const NOT_FOUND = errorReply('No such dashboard file: the version is not this server\'s, or the file does not exist', DASHBOARD_ERRORS.notFound.example());
const UNAVAILABLE = errorReply('The dashboard files of this installation cannot be read', DASHBOARD_ERRORS.unavailable.example());

function protect(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', DASHBOARD_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-resource-policy', 'same-origin');
}

/**
 * `GET /dashboard`: the fleet dashboard, a page and its scripts shipped in the package (`dashboard/` and the
 * pinned preact and htm). The page holds no data and needs no key; everything it shows comes from the
 * overview envelopes (`POST /control`, `/ws`), which only platform keys holding them may send. Assets live
 * under a prefix that changes with their content, so they are cached for good; the page itself never is.
 */
const dashboard: FastifyPluginAsyncTypebox = async (app) => {
  const facts = packageFacts();
  let loading: Promise<DashboardAssets> | undefined;
  const assets = () => {
    if (!facts) return Promise.reject(DASHBOARD_ERRORS.unavailable());
    loading ??= loadDashboardAssets(path.join(facts.root, 'dashboard'), facts.version).catch((error: unknown) => {
      loading = undefined;
      app.log.error({ err: error }, 'the dashboard files could not be read');
      throw DASHBOARD_ERRORS.unavailable();
    });
    return loading;
  };

  app.get(
    '/dashboard',
    {
      schema: {
        tags: ['dashboard'],
        operationId: 'getDashboard',
        summary: 'The fleet dashboard (HTML)',
        description:
          'A single-page view of the cluster, its servers, workers, organizations and events, with cordon, drain, restart and shed ' +
          'actions. The page itself is public and holds no data; it asks for a platform key and sends it as `Authorization: Bearer` ' +
          'on `POST /control` and in the first frame (`overview.subscribe` with `apikey`) of `/ws`.',
        security: [],
        response: {
          200: { description: 'The dashboard page', content: { 'text/html': { schema: Type.String({ description: 'HTML' }) } } },
          503: UNAVAILABLE,
        },
      },
    },
    async (_request, reply) => {
      const { page } = await assets();
      return protect(reply).header('cache-control', 'no-store').type('text/html; charset=utf-8').send(page);
    },
  );

  app.get(
    `${ASSET_PREFIX}/:version/*`,
    {
      schema: {
        tags: ['dashboard'],
        operationId: 'getDashboardAsset',
        summary: "A script, style or icon of the dashboard",
        description: 'Served under the prefix the page names, which changes with the content: cached for a year, `immutable`.',
        security: [],
        params: AssetParams,
        response: {
          200: { description: 'The file', content: { 'text/javascript': { schema: Type.String() }, 'text/css': { schema: Type.String() }, 'image/svg+xml': { schema: Type.String() } } },
          404: NOT_FOUND,
          503: UNAVAILABLE,
        },
      },
    },
    async (request, reply) => {
      const { version, files } = await assets();
      const file = request.params.version === version ? files.get(request.params['*']) : undefined;
      if (!file) throw DASHBOARD_ERRORS.notFound();
      return protect(reply).header('cache-control', IMMUTABLE).type(file.type).send(file.body);
    },
  );
};

export default dashboard;
