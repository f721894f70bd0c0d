import t from 'tap';
import { normalizeHost, normalizeHosts } from '../../src/auth/host.js';

t.test('a Host header becomes the stored host name: lower case, port and trailing dot removed', async (t) => {
  t.equal(normalizeHost('Example.COM'), 'example.com');
  t.equal(normalizeHost('example.com:8080'), 'example.com');
  t.equal(normalizeHost('example.com.'), 'example.com');
  t.equal(normalizeHost('127.0.0.1:80'), '127.0.0.1');
  t.equal(normalizeHost('[::1]:8080'), '::1');
  t.equal(normalizeHost('[::1]'), '::1');
  t.equal(normalizeHost('::1'), '::1', 'configured IPv6 without brackets');
});

t.test('anything else is not a host', async (t) => {
  for (const bad of ['', ' ', 'a b', 'example.com:', 'example.com:http', 'exa/mple', '[::1', '[::1]x', '[zz]', 'a..b', '.', 'x'.repeat(300), undefined, 42, null]) {
    t.equal(normalizeHost(bad), undefined, JSON.stringify(bad));
  }
  t.same(normalizeHosts(['A.example', 'a.example', 'b.example']), ['a.example', 'b.example'], 'duplicates merge');
  t.equal(normalizeHosts(['ok.example', 'not ok']), undefined, 'one bad host refuses the list');
});

t.test('answers stay right when the same headers repeat and when many distinct ones pass by', async (t) => {
  for (let round = 0; round < 3; round++) {
    t.equal(normalizeHost('Acme.Example:8080'), 'acme.example');
    t.equal(normalizeHost('acme..example'), undefined);
    t.equal(normalizeHost('[::1]:80'), '::1');
  }
  for (let i = 0; i < 3000; i++) if (normalizeHost(`H${i}.Example:1`) !== `h${i}.example`) t.fail(`h${i}`);
  t.equal(normalizeHost('Acme.Example:8080'), 'acme.example', 'after the remembered answers were dropped');
  t.equal(normalizeHost('acme..example'), undefined);
});
