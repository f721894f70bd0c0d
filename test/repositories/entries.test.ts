import t from 'tap';
import path from 'node:path';
import { parseRepositories, repositoryName } from '../../src/repositories/entries.js';

const project = '/srv/apps/fleet';

t.test('defaults: branch main, remote origin, a sibling of the project named after the URL, both switches on', async (t) => {
  const { entries, refused, conflict } = parseRepositories([{ url: 'git@github.com:owner/site.git' }], project);
  t.same(refused, []);
  t.equal(conflict, undefined);
  t.same(entries, [{
    index: 0, url: 'git@github.com:owner/site.git', api: undefined, branch: 'main', remote: 'origin', checkout: '/srv/apps/site',
    enabled: true, onStartup: 'clone', onShutdown: 'commit-and-push', startupTimeoutMs: 60_000, shutdownTimeoutMs: 10_000,
    initialUpload: { enabled: false, completed: false },
  }]);
});

t.test('localFsRoot relative to the project or absolute, directory as given', async (t) => {
  const { entries } = parseRepositories([
    { url: 'https://git.example.com/a/one.git', localFsRoot: '../work', directory: 'first' },
    { url: 'https://git.example.com/a/two.git', localFsRoot: '/var/checkouts' },
  ], project);
  t.same(entries.map((entry) => entry.checkout), [path.resolve('/srv/apps/work/first'), '/var/checkouts/two']);
});

t.test('malformed entries are refused with their index and field; the others proceed', async (t) => {
  const { entries, refused } = parseRepositories([
    { branch: 'main' },
    { url: 'https://git.example.com/a/ok.git' },
    { url: 'https://git.example.com/a/b.git', shutdownTimeoutMs: -5 },
    { url: 'https://git.example.com/a/c.git', onShutdown: 'push' },
    { url: 'https://user:hunter2@git.example.com/a/d.git' },
    { url: '--upload-pack=touch /tmp/x' },
    { url: 'https://git.example.com/a/e.git', directory: '../../etc' },
    'just a string',
    { url: 'https://git.example.com/a/f.git', initialUpload: { enabled: 'yes' } },
  ], project);
  t.same(entries.map((entry) => entry.index), [1]);
  t.same(refused.map(({ index, field }) => [index, field]), [
    [0, 'repositories[0].url'],
    [2, 'repositories[2].shutdownTimeoutMs'],
    [3, 'repositories[3].onShutdown'],
    [4, 'repositories[4].url'],
    [5, 'repositories[5].url'],
    [6, 'repositories[6].directory'],
    [7, 'repositories[7]'],
    [8, 'repositories[8].initialUpload.enabled'],
  ]);
  t.notMatch(JSON.stringify(refused), 'hunter2', 'a refusal never quotes the credential');
});

t.test('a duplicate URL, a duplicate checkout or the running project as destination refuses the whole list', async (t) => {
  const duplicateUrl = parseRepositories([{ url: 'https://h/a/x.git' }, { url: 'https://h/a/x.git', directory: 'other' }], project);
  t.same(duplicateUrl.entries, []);
  t.match(duplicateUrl.conflict, /repositories\[1\]\.url: the same URL as repositories\[0\]/);
  const duplicateCheckout = parseRepositories([{ url: 'https://h/a/x.git' }, { url: 'https://h/b/x.git' }], project);
  t.match(duplicateCheckout.conflict, /repositories\[1\]\.directory: the same checkout as repositories\[0\]/);
  const self = parseRepositories([{ url: 'https://h/a/fleet.git' }], project);
  t.match(self.conflict, /repositories\[0\]\.directory: \/srv\/apps\/fleet is the running project/);
  const parent = parseRepositories([{ url: 'https://h/a/x.git', localFsRoot: '/srv', directory: 'apps' }], project);
  t.match(parent.conflict, /is the running project \(or holds it\)/);
  const nested = parseRepositories([{ url: 'https://h/a/x.git', localFsRoot: 'sites' }], project);
  t.equal(nested.conflict, undefined, 'a checkout below the project is allowed');
  t.equal(nested.entries[0]?.checkout, '/srv/apps/fleet/sites/x');
});

t.test('no list is no repositories; a list that is not one is refused', async (t) => {
  t.same(parseRepositories(undefined, project), { entries: [], refused: [] });
  t.same(parseRepositories({ url: 'x' }, project).refused, [{ index: -1, field: 'repositories', reason: 'must be a list' }]);
});

t.test('names from URLs', async (t) => {
  t.same(['git@github.com:o/site.git', 'https://h/o/site', 'ssh://git@h:22/o/site.git/', '/srv/git/site.git'].map(repositoryName), ['site', 'site', 'site', 'site']);
});
