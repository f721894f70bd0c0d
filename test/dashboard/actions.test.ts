import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface Action { title: string; done: string; envelopes: Array<Record<string, unknown>> }
interface Actions {
  serverAction(kind: string, server: string, value?: boolean): Action;
  outcomeMessage(action: Action, results: Array<{ replies: Array<{ result?: unknown }> }>): string;
}

// The page's own module, as the browser loads it (plain JavaScript, no DOM needed).
const actions = (await import(pathToFileURL(path.resolve(import.meta.dirname, '..', '..', 'dashboard', 'lib', 'actions.js')).href)) as Actions;

t.test('a cordon accepted to take effect after the readiness grace is said so, not reported done', async (t) => {
  const cordon = actions.serverAction('cordon', 'node-b', true);
  const accepted = [{ replies: [{ server: 'node-b', worker: 0, ok: true, result: { accepted: true, effectiveInMs: 5_000 } }] }];
  t.equal(actions.outcomeMessage(cordon, accepted), 'Cordon server node-b: accepted. It takes effect after the readiness grace (5 s); /readyz answers 503 meanwhile.');
  const applied = [{ replies: [{ server: 'node-b', worker: 0, ok: true, result: ['cordoned', 'cordoned'] }] }];
  t.equal(actions.outcomeMessage(cordon, applied), 'Cordoned node-b.', 'applied at once: done');
});

t.test("the rolling restart is sent to the server's workers: restart of its primary is the hand-over", async (t) => {
  t.same(actions.serverAction('rolling', 'node-b').envelopes, [{ method: 'restart', server: 'node-b', broadcast: true }]);
});
