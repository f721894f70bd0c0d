// The processes a test starts (servers, their workers, the command line, fixtures) run as they do in
// production: without the test runner's process-tracking loader. tap adds that loader to the NODE_OPTIONS of
// each test process and hooks its every spawn to add it to the child's, for coverage; this suite runs without
// coverage, and the loader costs each child a module-hook thread and about half a second of CPU at start.
// Here the loader leaves this process's NODE_OPTIONS, and two hooks run first and last around tap's, so that a
// child gets the environment its spawn asked for.
import { createRequire } from 'node:module';

// tap writes the option quoted: "--import=file:///…/@tapjs/processinfo/dist/esm/import.mjs".
const TRACKER = /(^|\s)"?--(?:import|loader|experimental-loader)=[^\s"]*@tapjs[\\/]processinfo[^\s"]*"?(?=\s|$)/g;

/** NODE_OPTIONS without the tracker's loader; undefined when nothing else is left. */
export function withoutTracker(options) {
  const kept = options?.replace(TRACKER, '').trim();
  return kept ? kept : undefined;
}

const own = withoutTracker(process.env.NODE_OPTIONS);
if (own === undefined) delete process.env.NODE_OPTIONS;
else process.env.NODE_OPTIONS = own;

const require = createRequire(import.meta.url);
let onSpawn;
try {
  // The copy tap's loader hooks spawns with (there is one per process: it keeps its listeners on a global).
  onSpawn = createRequire(require.resolve('@tapjs/processinfo'))('process-on-spawn');
} catch {
  // not run by tap
}

const asked = new WeakMap();
onSpawn?.prependListener((spawning) => asked.set(spawning, spawning.env));
onSpawn?.addListener((spawning) => {
  spawning.env = asked.get(spawning) ?? spawning.env;
});
