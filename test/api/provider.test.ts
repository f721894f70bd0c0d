import t from 'tap';
import { compileProvider, providerViolation } from '../../src/api/provider.js';
import { upstreamRequest } from '../../src/api/request.js';

const valid = { name: 'items', baseUrl: 'https://items.example/v1/', endpoints: { create: { method: 'post', path: '/items/{id}' }, list: { method: 'get', path: '/items' } } };

t.test('provider definitions are refused naming the field', async (t) => {
  t.equal(providerViolation(valid), undefined);
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ baseUrl: 'ftp://items.example' }, /^baseUrl: must be an http or https URL/],
    [{ baseUrl: 'not a url' }, /^baseUrl: must be an absolute/],
    [{ baseUrl: 'https://user:pw@items.example' }, /^baseUrl: must not carry credentials/],
    [{ baseUrl: 'https://items.example/?a=1' }, /^baseUrl: must not have a query/],
    [{ headers: { host: 'evil' } }, /^headers\.host: set by the server/],
    [{ headers: { 'x-a': 'line\r\nbreak' } }, /^headers\.x-a/],
    [{ headers: { 'x-a': { secret: '' } } }, /^headers\.x-a/],
    [{ endpoints: { create: { method: 'post', path: '/a/../b' } } }, /^endpoints\.create\.path: "\." and "\.\." segments/],
    [{ endpoints: { create: { method: 'post', path: 'items' } } }, /^endpoints\.create\.path/],
    [{ endpoints: { create: { method: 'trace', path: '/a' } } }, /^endpoints\.create\.method/],
    [{ endpoints: { 'bad name': { method: 'get', path: '/a' } } }, /^endpoints/],
    [{ endpoints: {} }, /^endpoints/],
    [{ url: 'https://x' }, /^url: unknown field/],
    [{ timeoutMs: 0 }, /^timeoutMs/],
  ];
  for (const [change, message] of cases) t.match(providerViolation({ ...valid, ...change }), message, JSON.stringify(change));
});

t.test('requests stay under the base path; parameters fill one segment', async (t) => {
  const provider = compileProvider({ _id: 'x', organization_id: 'o', ...valid });
  t.same(upstreamRequest(provider, 'create', { id: 'a?b#c', title: 't' }), { method: 'post', path: '/v1/items/a%3Fb%23c', body: '{"title":"t"}' });
  t.same(upstreamRequest(provider, 'create', { id: 42 }), { method: 'post', path: '/v1/items/42' }, 'no body when data holds only parameters');
  t.same(upstreamRequest(provider, 'list', { page: 2, deep: true }), { method: 'get', path: '/v1/items?page=2&deep=true' });
  t.throws(() => upstreamRequest(provider, 'list', { filter: { nested: 1 } }), { statusCode: 400, message: /^data\.filter: query values/ });
  t.throws(() => upstreamRequest(provider, 'create', { id: 'https:x' }), { statusCode: 400, message: /^data\.id: path parameter must not be a URL/ });
  t.throws(() => upstreamRequest(provider, 'create', { id: '%2e%2e' }), { statusCode: 400, message: /^data\.id: path parameter must not contain "\.\."/ }, 'an encoded ".." is refused like the plain one');
  t.throws(() => upstreamRequest(provider, 'create', { id: 'a\u0000b' }), { statusCode: 400, message: /control characters/ });
  t.throws(() => upstreamRequest(provider, 'create', { id: 'x'.repeat(1025) }), { statusCode: 400, message: /1 to 1024 characters/ });
});
