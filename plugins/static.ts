import { realpathSync } from 'node:fs';
import path from 'node:path';
import fp from 'fastify-plugin';
import type { FastifyPluginAsync } from 'fastify';
import type { ResolvedConfig } from '../src/config/schema.js';

export interface StaticOptions {
  static: ResolvedConfig['http']['static'];
}

/**
 * Whether `pathname` (already URL-decoded by the router) names a file that really lies inside `realRoot`:
 * no `..` segment, no backslash or NUL, and — symlinks resolved — still under the root. Anything else is
 * answered as not found, so nothing tells a caller what lies outside.
 */
export function insideRoot(realRoot: string, pathname: string): boolean {
  if (/[\\\0]/.test(pathname) || pathname.split('/').includes('..')) return false;
  let real: string;
  try {
    real = realpathSync(path.join(realRoot, pathname));
  } catch {
    return false;
  }
  return real === realRoot || real.startsWith(realRoot + path.sep);
}

/**
 * Static files from `http.static.root` under `http.static.prefix`: GET and HEAD, dotfiles hidden, no directory
 * listings. The shed and fallback rules apply as to every route (the shed hook is global).
 */
const staticFiles: FastifyPluginAsync<StaticOptions> = async (app, options) => {
  const { root, prefix } = options.static;
  if (!root) return;
  // Resolved once, at boot: a root that does not exist fails the boot, naming the field.
  let realRoot: string;
  try {
    realRoot = realpathSync(path.resolve(root));
  } catch (error) {
    throw new Error(`http.static.root: ${root} cannot be served (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`, { cause: error });
  }
  // Loaded only when a root is configured: a worker without static files never holds the file server.
  const { default: fastifyStatic } = await import('@fastify/static');
  await app.register(fastifyStatic, {
    root: realRoot,
    prefix,
    dotfiles: 'ignore',
    list: false,
    index: ['index.html'],
    allowedPath: (pathname) => insideRoot(realRoot, pathname),
  });
};

export default fp(staticFiles, { name: 'fleetplane-static' });
