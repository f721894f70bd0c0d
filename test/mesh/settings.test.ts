import t from 'tap';
import { hostname } from 'node:os';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/errors.js';
import { meshCloseCode, meshSettings, meshUrl, publicUrl } from '../../src/mesh/settings.js';

const config = (object: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => loadConfig({ object, env }).config;

t.test('the mesh forms only with a secret or mutual TLS, and not when disabled', async (t) => {
  t.match(meshSettings(config({})), { active: false, why: 'no mesh.secret (or mesh.tls) configured' }, 'default: off, so a lone server binds no mesh port');
  t.match(meshSettings(config({ mesh: { secret: 's'.repeat(16) } })), { active: true, secret: 's'.repeat(16) });
  t.match(meshSettings(config({ mesh: { secret: 's'.repeat(16), enabled: false } })), { active: false, why: 'mesh.enabled is false' });
  t.match(meshSettings(config({}, { FLEETPLANE_MESH_SECRET: 'from-the-environment' })), { active: true, secret: 'from-the-environment' }, 'FLEETPLANE_MESH_SECRET');
});

t.test('production defaults of SPEC 6 and their environment overrides', async (t) => {
  const mesh = config({}).mesh;
  t.match(mesh, { port: 8090, host: '0.0.0.0', discoveryIntervalMs: 30_000, reconnect: { baseMs: 1_000, maxDelayMs: 30_000, jitterMinMs: 500, jitterMaxMs: 4_500, maxAttempts: 10 } });
  t.equal(config({}, { FLEETPLANE_MESH_RECONNECT_BASE_MS: '100' }).mesh.reconnect.baseMs, 100, 'FLEETPLANE_MESH_RECONNECT_BASE_MS shortens the schedule');
});

t.test('bad mesh settings fail at start with the field named', async (t) => {
  t.throws(() => config({ mesh: { secret: 'short' } }), /mesh\.secret/, 'a secret under 16 characters');
  t.throws(() => config({ mesh: { secert: 'x'.repeat(16) } }), /did you mean "mesh\.secret"/);
  t.throws(() => meshSettings(config({ mesh: { tls: { key: '/k.pem', cert: '/c.pem' } } })), { name: 'ConfigError', field: 'mesh.tls.ca' }, 'mutual TLS needs all three files');
  t.throws(() => meshSettings(config({ mesh: { reconnect: { jitterMinMs: 10, jitterMaxMs: 5 } } })), { name: 'ConfigError', field: 'mesh.reconnect.jitterMinMs' });
  t.throws(() => meshSettings(config({ mesh: { pingIntervalMs: 0 } })), { name: 'ConfigError', field: 'mesh.pingIntervalMs' });
  t.throws(() => meshSettings(config({ mesh: { tls: { key: '/nope/k', cert: '/nope/c', ca: '/nope/a' } } })), new ConfigError('mesh.tls', 'cannot read a TLS file (ENOENT)'), 'unreadable TLS files');
});

t.test('public and mesh URLs: configured, else derived from the bound addresses', async (t) => {
  const local = config({ http: { host: '127.0.0.1' }, mesh: { host: '127.0.0.1' } });
  t.equal(publicUrl(local, { http: 8080 }), 'http://127.0.0.1:8080');
  t.equal(publicUrl(local, { http: 8080, https: 8443 }), 'https://127.0.0.1:8443', 'HTTPS when it is served');
  t.equal(meshUrl(local, 8090, false), 'ws://127.0.0.1:8090');
  t.equal(meshUrl(local, 8090, true), 'wss://127.0.0.1:8090');
  const wildcard = config({});
  t.equal(publicUrl(wildcard, { http: 8080 }), `http://${hostname()}:8080`, 'bound to every interface: the host name');
  t.equal(meshUrl(wildcard, 8090, false), `ws://${hostname()}:8090`);
  t.equal(meshUrl(config({ mesh: { host: '::1' } }), 8090, false), 'ws://[::1]:8090');
  const explicit = config({ server: { publicUrl: 'https://node-2.example.com/' }, mesh: { url: 'wss://10.0.0.2:8090' } });
  t.equal(publicUrl(explicit, { http: 8080 }), 'https://node-2.example.com');
  t.equal(meshUrl(explicit, 1234, false), 'wss://10.0.0.2:8090');
  t.throws(() => config({ mesh: { url: 'http://x' } }), /mesh\.url/, 'the mesh URL is ws:// or wss://');
});

t.test('mesh.tls.mode "auto": the mesh forms with no secret and no files; files given with it are refused, naming one', async (t) => {
  t.match(meshSettings(config({ mesh: { tls: { mode: 'auto' } } })), { active: true, auto: true, tls: undefined }, 'active: the boot code gives it the cluster CA\'s certificate');
  t.match(meshSettings(config({})), { auto: false }, "default mode: 'files'");
  t.equal(config({}).mesh.tls.lifetimeMs, 21_600_000, 'certificates live 6 hours by default');
  t.equal(config({}, { FLEETPLANE_MESH_TLS_MODE: 'auto' }).mesh.tls.mode, 'auto', 'FLEETPLANE_MESH_TLS_MODE');
  t.throws(() => meshSettings(config({ mesh: { tls: { mode: 'auto', cert: '/c.pem' } } })), { name: 'ConfigError', field: 'mesh.tls.cert', message: /makes its own certificates/ });
  t.throws(() => meshSettings(config({ mesh: { tls: { mode: 'auto', key: '/k.pem', cert: '/c.pem', ca: '/a.pem' } } })), { name: 'ConfigError', field: 'mesh.tls.key' });
  t.throws(() => config({ mesh: { tls: { mode: 'self-signed' } } }), /mesh\.tls\.mode/, 'an unknown mode');
  t.throws(() => config({ mesh: { tls: { mode: 'auto', lifetimeMs: 5 } } }), /mesh\.tls\.lifetimeMs/, 'a lifetime under 10 s');
});

t.test('the close contract: 1000 (do not retry) only for an explicit shutdown; a restart, a reboot or a signal closes with 1012', async (t) => {
  t.equal(meshCloseCode('shutdown'), 1000);
  for (const reason of ['restart', 'reboot', 'SIGTERM', 'SIGINT', '']) t.equal(meshCloseCode(reason), 1012, reason || 'no reason');
});
