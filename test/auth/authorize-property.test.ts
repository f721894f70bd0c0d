import t from 'tap';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { Authorizer } from '../../src/auth/authorize.js';
import { AuthorizationError } from '../../src/auth/errors.js';
import { createKey, generateKey, revokeKey, type CreateKeyInput } from '../../src/auth/keys.js';
import { organization, testStore } from './fixtures/tenants.js';
import { oracleAllows } from './fixtures/permission-oracle.js';

const store = await testStore();
t.teardown(() => store.close());
const orgA = await organization(store, { name: 'a', hosts: ['a.example', 'a2.example'], defaultPermissions: { status: true, object: { collection: ['apis'] } } });
const orgB = await organization(store, { name: 'b', hosts: ['b.example'] });
/** The first organization of a store is its platform organization. */
const platformId = orgA._id;
const hostOrganization: Record<string, typeof orgA> = { 'a.example': orgA, 'a2.example': orgA, 'b.example': orgB };

interface IssuedKey {
  key: string;
  id: string;
  input: CreateKeyInput;
  revoked: boolean;
}
const issued: IssuedKey[] = [];
async function issue(input: CreateKeyInput, revoked = false) {
  const created = await createKey(store, input);
  if (revoked) await revokeKey(store, input.organizationId, created.key_id);
  issued.push({ key: created.key, id: created.key_id, input, revoked });
}
await issue({ organizationId: orgA._id, name: 'admin', admin: true });
await issue({ organizationId: orgA._id, name: 'limited', permissions: { 'object.read': { collection: ['apis', 'workflows'] }, cordon: { server: ['s1'] }, workflow: false } });
await issue({ organizationId: orgA._id, name: 'bound', permissions: { status: true, 'metrics.read': true, '*': { data: { region: 'eu' } } }, hosts: ['a.example'] });
await issue({ organizationId: orgA._id, name: 'revoked', admin: true }, true);
await issue({ organizationId: orgA._id, name: 'expired', admin: true, expiresAt: '2000-01-01T00:00:00Z' });
await issue({ organizationId: orgB._id, name: 'admin', admin: true });
await issue({ organizationId: orgB._id, name: 'limited', permissions: { 'object.read': true } });
const byKey = new Map(issued.map((entry) => [entry.key, entry]));

const keyText = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...issued.map((entry) => entry.key)) },
  { weight: 1, arbitrary: fc.constant(generateKey().key) },
  { weight: 1, arbitrary: fc.constant(`${issued[0]!.id}.${generateKey().secret}`) },
  { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
);
const host = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('a.example', 'A.EXAMPLE:8080', 'a2.example', 'b.example', 'b.example.') },
  { weight: 1, arbitrary: fc.constantFrom('unknown.example', '', '[::1]', 'bad host', undefined) },
);
const authorization = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: keyText.map((key) => `Bearer ${key}`) },
  { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(['Bearer x', 'Bearer y'])) },
);
const scalarOrAnything = fc.oneof({ weight: 3, arbitrary: fc.constantFrom('apis', 'keys', 'workflows', 's1', 's2', 'eu', 'us') }, { weight: 1, arbitrary: fc.anything({ maxDepth: 2 }) });
const optional = <T>(arbitrary: fc.Arbitrary<T>, weight = 1) => fc.oneof({ weight, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
const envelopeFields = fc.record({
  method: fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('status', 'object.read', 'cordon', 'metrics.read') },
    { weight: 1, arbitrary: fc.constantFrom('object.delete', 'workflow.deploy', 'shutdown', 'post', 'x..y', '', 'constructor', 'overview.emit') },
  ),
  apikey: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: keyText }, { weight: 1, arbitrary: fc.anything({ maxDepth: 1 }) }),
  collection: optional(scalarOrAnything),
  server: optional(fc.oneof(scalarOrAnything, fc.array(fc.constantFrom('s1', 's2'), { maxLength: 2 }))),
  data: optional(fc.oneof(fc.record({ region: scalarOrAnything }, { requiredKeys: [] }), fc.anything({ maxDepth: 2 }))),
  organization_id: optional(fc.oneof(fc.constant(orgB._id), fc.anything({ maxDepth: 1 }))),
  host: optional(fc.anything({ maxDepth: 1 })),
  user: optional(fc.anything({ maxDepth: 2 })),
  socket: optional(fc.anything({ maxDepth: 2 })),
});
/** Absent fields are left out rather than set to undefined, as in an envelope parsed from JSON. */
const envelope = fc.oneof(
  { weight: 6, arbitrary: envelopeFields.map((fields) => Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined))) },
  { weight: 1, arbitrary: fc.anything() },
);

function normalizedHost(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  return value.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
}

t.test('authorize.request never throws anything but a 400/403 refusal, and never allows more than the oracle', async (t) => {
  // Every request comes from one address: without the failed-authentication limit, so that each refusal is
  // the one its envelope and key deserve (the limit has its own tests).
  const authorizer = new Authorizer(store, { failureLimit: { max: 0 } });
  let allowed = 0;
  let refused = 0;
  const codes: Record<string, number> = {};
  await fc.assert(
    fc.asyncProperty(host, authorization, envelope, async (hostHeader, header, body) => {
      let result;
      try {
        result = await authorizer.request({ host: hostHeader, headers: { authorization: header as string | undefined }, socket: { remoteAddress: '10.0.0.1', remotePort: 5000 } }, body);
      } catch (error) {
        refused += 1;
        codes[(error as AuthorizationError).code] = (codes[(error as AuthorizationError).code] ?? 0) + 1;
        return error instanceof AuthorizationError && (error.statusCode === 400 || error.statusCode === 403);
      }
      allowed += 1;
      const sent = body as Record<string, unknown>;
      const resolvedHost = normalizedHost(hostHeader)!;
      const organization = hostOrganization[resolvedHost];
      const fromHeader = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : undefined;
      const fromBody = sent.apikey === null || sent.apikey === undefined ? undefined : sent.apikey;
      if (header !== undefined && fromHeader === undefined) return false;
      if (fromHeader !== undefined && fromBody !== undefined && fromHeader !== fromBody) return false;
      const presented = fromHeader ?? fromBody;
      const entry = presented === undefined ? undefined : byKey.get(presented as string);
      if (!organization || result.organization_id !== organization._id || result.host !== resolvedHost) return false;
      if (presented !== undefined) {
        if (!entry || entry.revoked || entry.input.organizationId !== organization._id) return false;
        if (entry.input.expiresAt && Date.parse(entry.input.expiresAt) <= Date.now()) return false;
        if (entry.input.hosts && !entry.input.hosts.includes(resolvedHost)) return false;
        if (result.user?.key_id !== entry.id) return false;
      } else if (result.user !== null) return false;
      const permitted = oracleAllows({ admin: entry?.input.admin, permissions: entry?.input.permissions, defaults: organization.defaultPermissions }, sent);
      // SPEC 8.4: server-level methods and targets only for a key of the platform organization (the first made).
      const serverLevel = /^(cordon|drain|shed|restart|reboot|shutdown|storage(\..+)?|metrics\.read)$/.test(String(sent.method)) || ['master', 'worker', 'server', 'cluster', 'broadcast'].some((field) => sent[field] !== undefined && sent[field] !== false);
      if (serverLevel && (entry === undefined || entry.input.organizationId !== platformId)) return false;
      // An internal method is never allowed, whatever the key.
      if (sent.method === 'overview.emit') return false;
      if (result.user && result.user.platform !== (entry!.input.organizationId === platformId)) return false;
      return permitted && !('apikey' in result) && Object.isFrozen(result) && result.socket?.remoteAddress === '10.0.0.1';
    }),
    { numRuns: 3_000 },
  );
  t.ok(allowed > 50, `allowed requests were exercised (${allowed})`);
  for (const code of ['invalid_envelope', 'forbidden', 'malformed_authorization', 'malformed_key', 'conflicting_keys', 'platform_only', 'key_revoked', 'key_expired', 'permission_denied']) {
    t.ok(codes[code], `the ${code} refusal was exercised`);
  }
  t.ok(refused > 100, `refused requests were exercised (${refused})`);
});

t.test('one set of rules on both paths: what the cached path answers, the full path answers alike; with warm caches the cached path answers every request the full path allows', async (t) => {
  // No write happens during the runs, so the caches stay valid for the whole test (no revalidation due);
  // refusals are answered at once (their hold has its own tests).
  const authorizer = new Authorizer(store, { failureLimit: { max: 0 }, refusalFloorMs: 0, revalidateMs: 600_000, maxAgeMs: 600_000 });
  const counts = { cachedAnswers: 0, warmAllowed: 0, fullRefusals: 0 };
  await fc.assert(
    fc.asyncProperty(host, authorization, envelope, fc.boolean(), async (hostHeader, header, body, warm) => {
      const request = { host: hostHeader, headers: { authorization: header as string | undefined }, socket: { remoteAddress: '10.0.0.1', remotePort: 5000 } };
      // Warm: the same request was decided the long way just before, so every record it needs is cached.
      if (warm) await authorizer.request(request, body).catch(() => undefined);
      let fast;
      try {
        fast = authorizer.cached(request, body);
      } catch (error) {
        throw new Error(`the cached path threw (${(error as Error).message}) instead of deferring to the full path`);
      }
      let full;
      try {
        full = await authorizer.request(request, body);
      } catch (error) {
        if (!(error instanceof AuthorizationError)) throw error;
        counts.fullRefusals += 1;
        // The full path refused: the cached path must not have authorized it.
        return fast === undefined;
      }
      if (fast !== undefined) {
        counts.cachedAnswers += 1;
        if (!isDeepStrictEqual(fast, full)) return false;
      }
      if (warm) {
        counts.warmAllowed += 1;
        return fast !== undefined;
      }
      return true;
    }),
    { numRuns: 3_000 },
  );
  t.ok(counts.cachedAnswers > 25, `the cached path answered (${counts.cachedAnswers})`);
  t.ok(counts.warmAllowed > 25, `warm requests the full path allowed were exercised (${counts.warmAllowed})`);
  t.ok(counts.fullRefusals > 100, `refusals were exercised (${counts.fullRefusals})`);
  authorizer.close();
});
