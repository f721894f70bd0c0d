// The processes a test starts (servers, their workers, the command line, fixtures) run as they do in
// production: without the test runner's process-tracking loader. tap hooks every spawn of a test process to add
// that loader to the child's NODE_OPTIONS, for coverage; this suite runs without coverage, and the loader costs
// each child a module-hook thread and about half a second of CPU at start. This hook runs after tap's and takes
// back what it added: its `--import`/`--loader` of @tapjs/processinfo and its _TAPJS_PROCESSINFO_* variables.
// What a test itself puts in a child's NODE_OPTIONS stays.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let onSpawn;
try {
  // The copy tap's loader hooks spawns with (one per process: it keeps its listeners on a global).
  onSpawn = createRequire(require.resolve('@tapjs/processinfo'))('process-on-spawn');
} catch {
  // not run by tap
}

// tap writes the option quoted: "--import=file:///…/@tapjs/processinfo/dist/esm/import.mjs".
const TRACKER = /(^|\s)"?--(?:import|loader|experimental-loader)=[^\s"]*@tapjs[\\/]processinfo[^\s"]*"?(?=\s|$)/g;

/** NODE_OPTIONS without the tracker's loader; undefined when nothing else is left. */
export function withoutTracker(options) {
  const kept = options?.replace(TRACKER, '').trim();
  return kept ? kept : undefined;
}

onSpawn?.addListener((spawning) => {
  const env = { ...spawning.env };
  for (const key of Object.keys(env)) if (key.startsWith('_TAPJS_PROCESSINFO_')) delete env[key];
  const options = withoutTracker(env.NODE_OPTIONS);
  if (options === undefined) delete env.NODE_OPTIONS;
  else env.NODE_OPTIONS = options;
  spawning.env = env;
  return spawning;
});
