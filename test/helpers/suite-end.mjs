// Runs once after the test files (tap's `after`): kills every process this run started that is still running,
// whichever file started it and however that file ended (a SIGKILL on timeout runs none of its own teardown).
import { killLeftovers } from './leftovers.mjs';

// The runner started this script, as it started every test file: the run is named after it.
const left = killLeftovers({ run: String(process.ppid) });
if (left.length > 0) {
  process.stderr.write(`killed ${left.length} processes the tests left running:\n`);
  for (const { pid, command } of left) process.stderr.write(`  ${pid} ${command.slice(0, 160)}\n`);
}
