import t from 'tap';
import { grants, isPermitted, ruleFor } from '../../src/auth/permissions.js';

t.test('the exact method decides before any prefix, and a prefix before "*"', async (t) => {
  const permissions = { 'workflow.deploy': false, workflow: true, '*': false };
  t.equal(ruleFor(permissions, 'workflow.deploy')?.entry, 'workflow.deploy');
  t.equal(grants(permissions, { method: 'workflow.deploy' }), false, 'exact false wins over the prefix');
  t.equal(grants(permissions, { method: 'workflow.run' }), true, 'the prefix covers other sub-methods');
  t.equal(grants(permissions, { method: 'workflow.deploy.now' }), false, 'the longest prefix decides');
  t.equal(grants(permissions, { method: 'object.read' }), false, '"*" decides the rest');
  t.equal(grants({ '*': true }, { method: 'anything.at.all' }), true);
  t.equal(grants({}, { method: 'status' }), false, 'no entry: denied');
});

t.test('a prefix matches only at dot boundaries', async (t) => {
  t.equal(grants({ work: true }, { method: 'workflow.deploy' }), false);
  t.equal(grants({ workflow: true }, { method: 'workflows' }), false);
});

t.test('a restriction lists allowed values for envelope fields', async (t) => {
  const permissions = { post: { api: ['items', 'users'], endpoint: 'create' } };
  t.equal(grants(permissions, { method: 'post', api: 'items', endpoint: 'create' }), true);
  t.equal(grants(permissions, { method: 'post', api: 'billing', endpoint: 'create' }), false, 'api not listed');
  t.equal(grants(permissions, { method: 'post', api: 'items', endpoint: 'delete' }), false, 'endpoint not listed');
  t.equal(grants(permissions, { method: 'post', api: 'items' }), false, 'a missing restricted field is denied');
  t.equal(grants(permissions, { method: 'get', api: 'items', endpoint: 'create' }), false, '/api is authorized on its own verb');
});

t.test('an array of targets is allowed only when every target is', async (t) => {
  const permissions = { cordon: { server: ['s1', 's2'], worker: [1, 2] } };
  t.equal(grants(permissions, { method: 'cordon', server: ['s1', 's2'], worker: 1 }), true);
  t.equal(grants(permissions, { method: 'cordon', server: ['s1', 's3'], worker: 1 }), false);
  t.equal(grants(permissions, { method: 'cordon', server: [], worker: 1 }), false, 'an empty target list is not a pass');
  t.equal(grants(permissions, { method: 'cordon', server: 's1', worker: [1, 3] }), false);
});

t.test('data constraints apply to data fields by dotted path', async (t) => {
  const permissions = { 'server.create': { data: { region: ['eu'], 'size.class': ['small', 'medium'] } } };
  t.equal(grants(permissions, { method: 'server.create', data: { region: 'eu', size: { class: 'small' } } }), true);
  t.equal(grants(permissions, { method: 'server.create', data: { region: 'us', size: { class: 'small' } } }), false);
  t.equal(grants(permissions, { method: 'server.create', data: { region: 'eu' } }), false, 'a missing data field is denied');
  t.equal(grants(permissions, { method: 'server.create', data: { region: 'eu', size: { class: { $in: ['small'] } } } }), false, 'objects never match');
});

t.test('admin keys may do everything; defaults apply with or without a key', async (t) => {
  t.equal(isPermitted({ admin: true }, { method: 'shutdown' }), true);
  t.equal(isPermitted({ permissions: {}, defaults: { status: true } }, { method: 'status' }), true);
  t.equal(isPermitted({ permissions: { cordon: true }, defaults: { status: true } }, { method: 'cordon' }), true);
  t.equal(isPermitted({ defaults: { status: true } }, { method: 'cordon' }), false);
  t.equal(isPermitted({}, { method: 'status' }), false, 'no defaults: nothing without a key');
});

t.test('methods named like Object.prototype members find nothing', async (t) => {
  for (const method of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) t.equal(grants({}, { method }), false, method);
  t.equal(grants(JSON.parse('{"__proto__": true}'), { method: '__proto__' }), true, 'an own entry of that name does count');
});

t.test('malformed permission values deny instead of throwing', async (t) => {
  const broken = { a: 'yes', b: 1, c: null, d: [true], e: { api: { nested: true } }, f: { data: 'eu' } } as unknown as Record<string, never>;
  for (const method of ['a', 'b', 'c', 'd', 'e', 'f']) t.equal(grants(broken, { method, api: 'x', data: { region: 'eu' } }), false, method);
  t.equal(grants(null, { method: 'a' }), false);
});
