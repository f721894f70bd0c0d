import { createRequire } from 'node:module';
import type * as Mingo from 'mingo';
import type * as MingoUpdater from 'mingo/updater';

// mingo is about 600 KiB of code: it is loaded by the first query, projection, sort or update that needs it, not
// with the store (plain equality filters never do). `require` resolves the same build an `import` would (the
// package's `node` export), so there is one mingo per process either way.
const require = createRequire(import.meta.url);
let query: typeof Mingo | undefined;
let updater: typeof MingoUpdater | undefined;

/** mingo's query module, loaded on first use. */
export const mingo = (): typeof Mingo => (query ??= require('mingo') as typeof Mingo);

/** mingo's update operators, loaded on first use. */
export const mingoUpdater = (): typeof MingoUpdater => (updater ??= require('mingo/updater') as typeof MingoUpdater);
