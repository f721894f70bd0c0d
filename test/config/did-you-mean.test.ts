import t from 'tap';
import { closestMatch, editDistance } from '../../src/config/did-you-mean.js';

const paths = [
  'http',
  'workers',
  'restart',
  'health',
  'http.port',
  'http.host',
  'workers.count',
  'workers.maxRssMb',
  'restart.backoffMs',
  'restart.maxBackoffMs',
  'health.heartbeatMs',
  'health.wedgedTimeoutMs',
  'health.lagSpikeMs',
  'log.level',
];

t.test('editDistance counts insertions, deletions and substitutions', async (t) => {
  t.equal(editDistance('kitten', 'sitting'), 3);
  t.equal(editDistance('same', 'same'), 0);
  t.equal(editDistance('', 'abc'), 3);
  t.equal(editDistance('abc', ''), 3);
  t.equal(editDistance('backofMs', 'backoffMs'), 1, 'one missing letter');
  t.equal(editDistance('flaw', 'lawn'), editDistance('lawn', 'flaw'), 'symmetric');
});

t.test('a small typo finds the real key', async (t) => {
  t.equal(closestMatch('htp', paths), 'http');
  t.equal(closestMatch('workers.cout', paths), 'workers.count');
  t.equal(closestMatch('restart.backofMs', paths), 'restart.backoffMs');
  t.equal(closestMatch('health.wedgedTimoutMs', paths), 'health.wedgedTimeoutMs');
});

t.test('a key in the wrong section finds its real home', async (t) => {
  t.equal(closestMatch('health.maxRssMb', paths), 'workers.maxRssMb');
  t.equal(closestMatch('maxRssMb', paths), 'workers.maxRssMb', 'also without any section');
});

t.test('matching ignores case', async (t) => {
  t.equal(closestMatch('HTTP.Port', paths), 'http.port');
});

t.test('nothing plausible gives no suggestion', async (t) => {
  t.equal(closestMatch('banana', paths), undefined);
  t.equal(closestMatch('workers.somethingElse', paths), undefined);
  t.equal(closestMatch('http.port', []), undefined, 'no candidates');
});
