import t from 'tap';
import { HANDSHAKE_WINDOW_MS, HEADER, NonceCache, acceptHeaders, dialHeaders, verifyAccept, verifyDial } from '../../src/mesh/handshake.js';

const SECRET = 'a-cluster-secret-of-some-length';
const claim = { server: 'srv-b', cluster: 'blue', to: 'srv-a' };
const NOW = 1_800_000_000_000;

t.test('a signed dial verifies and yields the claim', async (t) => {
  const { headers, nonce } = dialHeaders(claim, SECRET, NOW);
  const check = verifyDial(headers, SECRET, NOW + 1_000);
  t.same(check, { ok: true, claim: { ...claim, timestamp: NOW, nonce } });
  t.match(nonce, /^[0-9a-f]{32}$/);
});

t.test('the signature covers every claimed field: changing one fails verification', async (t) => {
  const { headers } = dialHeaders(claim, SECRET, NOW);
  for (const [field, value] of [
    [HEADER.server, 'srv-c'],
    [HEADER.cluster, 'green'],
    [HEADER.to, 'srv-z'],
    [HEADER.timestamp, String(NOW + 1)],
    [HEADER.nonce, 'f'.repeat(32)],
  ] as const) {
    t.match(verifyDial({ ...headers, [field]: value }, SECRET, NOW), { ok: false, status: 401, reason: 'bad handshake signature' }, `${field} changed`);
  }
  t.match(verifyDial(headers, 'another-secret-entirely!!', NOW), { ok: false, reason: 'bad handshake signature' }, 'another secret');
  t.match(verifyDial({ ...headers, [HEADER.signature]: 'zz' }, SECRET, NOW), { ok: false, reason: 'bad handshake signature' }, 'garbage signature');
  const { [HEADER.signature]: _dropped, ...unsigned } = headers;
  t.match(verifyDial(unsigned, SECRET, NOW), { ok: false, reason: 'bad handshake signature' }, 'no signature while the cluster has a secret');
});

t.test('handshakes outside the time window are refused, both ways', async (t) => {
  const { headers } = dialHeaders(claim, SECRET, NOW);
  t.match(verifyDial(headers, SECRET, NOW + HANDSHAKE_WINDOW_MS), { ok: true }, 'at the edge');
  t.match(verifyDial(headers, SECRET, NOW + HANDSHAKE_WINDOW_MS + 1), { ok: false, reason: 'handshake outside the time window' }, 'too old');
  t.match(verifyDial(headers, SECRET, NOW - HANDSHAKE_WINDOW_MS - 1), { ok: false, reason: 'handshake outside the time window' }, 'from the future');
});

t.test('requests that are not handshakes or are malformed are refused before any crypto', async (t) => {
  t.match(verifyDial({}, SECRET, NOW), { ok: false, status: 401, reason: 'not a mesh handshake' });
  const { headers } = dialHeaders(claim, SECRET, NOW);
  t.match(verifyDial({ ...headers, [HEADER.server]: 'bad id with spaces' }, SECRET, NOW), { ok: false, reason: 'malformed handshake' });
  t.match(verifyDial({ ...headers, [HEADER.nonce]: 'short' }, SECRET, NOW), { ok: false, reason: 'malformed handshake' });
  t.match(verifyDial({ ...headers, [HEADER.timestamp]: 'yesterday' }, SECRET, NOW), { ok: false, reason: 'malformed handshake' });
  t.match(verifyDial({ ...headers, [HEADER.server]: ['a', 'b'] as unknown as string }, SECRET, NOW), { ok: false, reason: 'not a mesh handshake' }, 'repeated header');
});

t.test('without a secret (mutual TLS mode) the claim is read but not signed', async (t) => {
  const { headers } = dialHeaders(claim, undefined, NOW);
  t.notOk(HEADER.signature in headers);
  t.match(verifyDial(headers, undefined, NOW), { ok: true, claim });
});

t.test("the acceptor's answer is bound to the dialer's nonce and names the acceptor", async (t) => {
  const { headers, nonce } = dialHeaders(claim, SECRET, NOW);
  const check = verifyDial(headers, SECRET, NOW);
  if (!check.ok) throw new Error('setup');
  const answer = Object.fromEntries(acceptHeaders('srv-a', check.claim, SECRET, NOW).map((line) => line.split(': ') as [string, string]));
  const expected = { peer: 'srv-a', self: 'srv-b', cluster: 'blue', nonce };
  t.equal(verifyAccept(answer, expected, SECRET, NOW), undefined, 'good answer');
  t.match(verifyAccept(answer, { ...expected, nonce: '0'.repeat(32) }, SECRET, NOW), /bad answer signature/, 'an answer to another handshake');
  t.match(verifyAccept(answer, { ...expected, peer: 'srv-x' }, SECRET, NOW), /answered as "srv-a", expected "srv-x"/, 'the wrong server answered');
  t.match(verifyAccept({}, expected, SECRET, NOW), /answered as "nobody"/, 'not a mesh server');
  t.match(verifyAccept(answer, expected, SECRET, NOW + HANDSHAKE_WINDOW_MS + 1), /time window/, 'an old answer');
});

t.test('the nonce cache refuses a replay, forgets nonces past the window, and stays bounded', async (t) => {
  const cache = new NonceCache(1_000, 3);
  t.equal(cache.remember('n1', NOW, NOW), true);
  t.equal(cache.remember('n1', NOW, NOW + 10), false, 'replay');
  t.equal(cache.remember('n2', NOW, NOW), true);
  t.equal(cache.remember('n3', NOW, NOW), true);
  t.equal(cache.remember('n4', NOW, NOW), false, 'full of live entries: refused rather than grown');
  t.equal(cache.size, 3);
  t.equal(cache.remember('n4', NOW + 2_000, NOW + 2_000), true, 'expired entries make room');
  t.equal(cache.size, 1);
});
