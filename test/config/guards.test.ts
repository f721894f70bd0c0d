import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/errors.js';

const tmp = () => mkdtempSync(path.join(tmpdir(), 'fleetplane-guards-'));

t.test('fallback.redirect must be an absolute http(s) URL: a relative one loops back to the node', async (t) => {
  for (const redirect of ['http://lb.example.com', 'https://lb.example.com:8443/base', 'HTTPS://LB.EXAMPLE.COM']) {
    t.equal(loadConfig({ object: { fallback: { redirect } }, env: {}, cwd: tmp() }).config.fallback.redirect, redirect, `${redirect}: accepted`);
  }
  for (const redirect of ['lb.example.com', '//lb.example.com', '/x', 'http://', 'http:lb.example.com', 'javascript:alert(1)', 'ftp://lb.example.com']) {
    t.throws(() => loadConfig({ object: { fallback: { redirect } }, env: {}, cwd: tmp() }), { field: 'fallback.redirect', message: /must be an absolute http:\/\/ or https:\/\/ URL/ }, `${redirect}: refused`);
  }
  const dir = tmp();
  const file = path.join(dir, 'fleetplane.config.json');
  writeFileSync(file, JSON.stringify({ fallback: { redirect: 'lb.example.com' } }));
  let error: unknown;
  try {
    loadConfig({ env: {}, cwd: dir });
  } catch (caught) {
    error = caught;
  }
  t.ok(error instanceof ConfigError);
  t.equal((error as Error).message, `${file}: fallback.redirect: must be an absolute http:// or https:// URL, e.g. https://lb.example.com (got "lb.example.com")`, 'the file is named');
});
