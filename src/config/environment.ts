import { closestMatch } from './did-you-mean.js';

const PREFIX = 'FLEETPLANE_';

/**
 * Variables of the prefix that are not settings, yet read by Fleetplane or its tests: the config file's path,
 * the keys that seal secrets, the node credential an upload command gets, the git credentials of the askpass
 * helper, and the browser tests' Chromium.
 */
const NOT_SETTINGS = new Set([
  'FLEETPLANE_CONFIG',
  'FLEETPLANE_SECRETS_KEY',
  'FLEETPLANE_SECRETS_PREVIOUS_KEY',
  'FLEETPLANE_NODE_CREDENTIAL',
  'FLEETPLANE_GIT_USERNAME',
  'FLEETPLANE_GIT_PASSWORD',
  'FLEETPLANE_CHROMIUM',
]);
/** Whole families that are not settings: what a primary hands its workers and its successor; the test suite's. */
const NOT_SETTING_PREFIXES = ['FLEETPLANE_INTERNAL_', 'FLEETPLANE_TEST_'];

/**
 * A `FLEETPLANE_*` variable that names no setting is a typo more often than not (`FLEETPLANE_HTTP_PROT`): one
 * warning per variable, with the closest setting's variable when one is close. Unknown config keys are refused;
 * an unknown variable is only warned about, since the environment also carries what other programs set.
 */
export function unknownVariableWarnings(env: NodeJS.ProcessEnv, settings: Iterable<string>): string[] {
  const known = new Set(settings);
  const suffixes = [...known].map((name) => name.slice(PREFIX.length));
  const warnings: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(PREFIX) || known.has(name) || NOT_SETTINGS.has(name)) continue;
    if (NOT_SETTING_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    const hint = closestMatch(name.slice(PREFIX.length), suffixes);
    warnings.push(`${name}: unknown setting${hint ? ` (did you mean ${PREFIX}${hint}?)` : ', ignored'}`);
  }
  return warnings;
}
