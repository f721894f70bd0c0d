import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ENV_VARIABLES, loadConfig } from '../../src/config/load.js';
import { unknownVariableWarnings } from '../../src/config/environment.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const tmp = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-environment-'));
const warningsFor = (env: NodeJS.ProcessEnv) => loadConfig({ env, cwd: tmp() }).warnings;

t.test('an unknown FLEETPLANE_ variable is one warning, with the closest setting when one is close', async (t) => {
  t.same(warningsFor({ FLEETPLANE_HTTP_PROT: '9000' }), ['FLEETPLANE_HTTP_PROT: unknown setting (did you mean FLEETPLANE_HTTP_PORT?)']);
  t.same(warningsFor({ FLEETPLANE_WORKRS: '2' }), ['FLEETPLANE_WORKRS: unknown setting (did you mean FLEETPLANE_WORKERS?)']);
  t.same(warningsFor({ FLEETPLANE_COMPLETELY_OTHER_THING: '1' }), ['FLEETPLANE_COMPLETELY_OTHER_THING: unknown setting, ignored']);
  t.same(warningsFor({ FLEETPLANE_HTTP_PORT: '9000', FLEETPLANE_WORKERS: '2', FLEETPLANE_MONGODB_URL: '', PATH: '/bin', HTTP_PROT: '1' }), [], 'settings and other programs\' variables: none');
  t.equal(loadConfig({ env: { FLEETPLANE_HTTP_PROT: '9000' }, cwd: tmp() }).config.http.port, 8080, 'and it is ignored');
});

t.test('variables that are not settings but are read by Fleetplane or its tests are not warned about', async (t) => {
  const env = {
    FLEETPLANE_CONFIG: '/nonexistent-is-not-read-here',
    FLEETPLANE_SECRETS_KEY: 'k',
    FLEETPLANE_SECRETS_PREVIOUS_KEY: 'k',
    FLEETPLANE_NODE_CREDENTIAL: 'c',
    FLEETPLANE_GIT_USERNAME: 'u',
    FLEETPLANE_GIT_PASSWORD: 'p',
    FLEETPLANE_INTERNAL_WORKER: '1',
    FLEETPLANE_INTERNAL_HANDOVER: 'x',
    FLEETPLANE_TEST_TIME_SCALE: '2',
    FLEETPLANE_CHROMIUM: '/usr/bin/chromium',
  };
  t.same(unknownVariableWarnings(env, ENV_VARIABLES.keys()), []);
});

/** Every `FLEETPLANE_*` name the project reads or documents: in code as a string or an `env.` access, in docs quoted. */
function namesInRepository(): Map<string, string> {
  const found = new Map<string, string>();
  const visit = (relative: string) => {
    const full = path.join(ROOT, relative);
    if (statSync(full).isDirectory()) {
      for (const entry of readdirSync(full)) if (entry !== 'node_modules' && !entry.startsWith('.')) visit(path.join(relative, entry));
      return;
    }
    if (!/\.(ts|mjs|js|md|json|yml)$/.test(relative) && !relative.endsWith('Dockerfile')) return;
    for (const match of readFileSync(full, 'utf8').matchAll(/(?:process\.env\.|env\.|env\[['"`]|['"`])(FLEETPLANE_[A-Z0-9_]*[A-Z0-9])\b/g)) {
      if (!found.has(match[1]!)) found.set(match[1]!, relative);
    }
  };
  for (const root of ['src', 'cli', 'test', 'scripts', 'docs', 'examples', 'README.md', 'Dockerfile', 'index.ts']) visit(root);
  return found;
}

/** The mistyped names the docs and these tests show on purpose. */
const TYPOS = new Set(['FLEETPLANE_HTTP_PROT', 'FLEETPLANE_WORKRS', 'FLEETPLANE_COMPLETELY_OTHER_THING']);

t.test('no FLEETPLANE_ name the project itself uses or documents is warned about', async (t) => {
  const names = namesInRepository();
  t.ok(names.size > 50, `${names.size} names found`);
  for (const [name, where] of names) if (!TYPOS.has(name)) t.same(unknownVariableWarnings({ [name]: 'x' }, ENV_VARIABLES.keys()), [], `${name} (${where})`);
});
