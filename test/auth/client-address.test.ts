import t from 'tap';
import { TrustedProxies, addressRange, failureKey, normalizeAddress } from '../../src/auth/client-address.js';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/errors.js';

t.test('without trusted proxies the socket peer is the client, whatever X-Forwarded-For says', async (t) => {
  const proxies = new TrustedProxies();
  t.equal(proxies.clientAddress('203.0.113.5', '198.51.100.7'), '203.0.113.5');
  t.equal(proxies.clientAddress('::ffff:203.0.113.5', undefined), '203.0.113.5', 'an IPv4-mapped peer is its IPv4 address');
  t.equal(proxies.clientAddress(undefined, '198.51.100.7'), 'unknown');
});

t.test('behind a trusted proxy the client is the rightmost forwarded address that is not a trusted proxy', async (t) => {
  const proxies = new TrustedProxies(['10.0.0.0/8', '192.0.2.1', 'fd00::/8']);
  t.equal(proxies.clientAddress('10.1.2.3', '198.51.100.7'), '198.51.100.7');
  t.equal(proxies.clientAddress('::ffff:10.1.2.3', '198.51.100.7'), '198.51.100.7', 'a mapped proxy address is trusted too');
  t.equal(proxies.clientAddress('10.1.2.3', 'spoofed-by-client, 203.0.113.9, 192.0.2.1'), '203.0.113.9', 'hops left of the first untrusted one are ignored');
  t.equal(proxies.clientAddress('10.1.2.3', ['1.1.1.1', '203.0.113.9']), '203.0.113.9', 'repeated headers read as one list');
  t.equal(proxies.clientAddress('fd00::1', '[2001:db8::7]:4711'), '2001:db8::7', 'bracketed IPv6 with a port');
  t.equal(proxies.clientAddress('10.1.2.3', '203.0.113.9:4711'), '203.0.113.9', 'IPv4 with a port');
  t.equal(proxies.clientAddress('10.1.2.3', '10.4.4.4'), '10.4.4.4', 'only trusted hops: the leftmost is the client');
  t.equal(proxies.clientAddress('10.1.2.3', 'unknown'), '10.1.2.3', 'a hop that is no address stops at the last trusted proxy');
  t.equal(proxies.clientAddress('10.1.2.3', undefined), '10.1.2.3', 'a proxy without the header is the client');
});

t.test('a spoofed X-Forwarded-For from a peer that is not a trusted proxy is ignored', async (t) => {
  const proxies = new TrustedProxies(['10.0.0.0/8']);
  t.equal(proxies.clientAddress('203.0.113.5', '10.1.1.1, 198.51.100.7'), '203.0.113.5');
  t.notOk(proxies.trusts('11.0.0.1'));
  t.notOk(proxies.trusts('not-an-address'));
});

t.test('address ranges: addresses and CIDR ranges, nothing else', async (t) => {
  t.same(addressRange('10.0.0.0/8'), { address: '10.0.0.0', prefix: 8, family: 'ipv4' });
  t.same(addressRange('::1'), { address: '::1', prefix: 128, family: 'ipv6' });
  for (const bad of ['10.0.0.0/33', 'fd00::/129', 'localhost', '10.0.0.0/8/1', '10.0.0.0/x', '']) t.equal(addressRange(bad), undefined, bad);
  t.throws(() => new TrustedProxies(['10.0.0.0/8', 'proxy.internal']), /proxy\.internal/);
});

t.test('http.trustProxy is validated when the config is loaded, naming the entry', async (t) => {
  const load = (trustProxy: unknown) => loadConfig({ env: {}, object: { http: { trustProxy } } });
  t.same(load(['10.0.0.0/8', '::1']).config.http.trustProxy, ['10.0.0.0/8', '::1']);
  t.same(loadConfig({ env: {}, object: {} }).config.http.trustProxy, [], 'trusts nobody by default');
  const error = (() => {
    try {
      load(['10.0.0.0/8', 'proxy.internal']);
    } catch (caught) {
      return caught;
    }
  })();
  t.ok(error instanceof ConfigError, 'refused with a ConfigError');
  t.match((error as Error).message, /http\.trustProxy\[1\].*proxy\.internal/);
  t.same(loadConfig({ env: { FLEETPLANE_HTTP_TRUST_PROXY: '10.0.0.1 10.0.0.2' }, object: {} }).config.http.trustProxy, ['10.0.0.1', '10.0.0.2'], 'from the environment');
  t.same(loadConfig({ env: {}, object: {} }).config.auth.failureLimit, { max: 20, windowMs: 10_000, maxAddresses: 10_000, delayMs: 500 }, 'the failure limit defaults');
});

t.test('IPv6 failures count per /64, IPv4 per address', async (t) => {
  t.equal(failureKey('203.0.113.5'), '203.0.113.5');
  t.equal(failureKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
  t.equal(failureKey('2001:0db8:0001:0002:ffff:0:0:9'), '2001:db8:1:2::/64');
  t.equal(failureKey('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(failureKey('::1'), '0:0:0:0::/64');
  t.equal(normalizeAddress('::FFFF:192.0.2.1'), '192.0.2.1');
});
