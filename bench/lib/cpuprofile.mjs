// Reads a V8 CPU profile (`node --cpu-prof`) and says where the time of a window went, per request:
// - by stage: the outermost frame of Fleetplane's own code (dist/) or of a Fastify plugin package on the stack,
//   which is the hook, handler or service the framework called; stacks without one are the framework's own work,
//   told apart by what they contain (logging, schema validation, serialization, body parsing, core, Node);
// - by product function, inclusive (each dist/ function counted once per sample whatever its recursion);
// - by function, self time (the leaf of each sample).
// Sample times are V8's monotonic clock in µs, the same clock as `process.hrtime` on Linux, so a window taken
// by the load generator with `process.hrtime.bigint()` selects the samples of the measured run.
// Every sample counts the same: the gaps between samples are wall time and grow whenever the process waits for
// a CPU (the load generator and other work share the machine), so time-weighted figures would charge waiting to
// whatever ran last. The shares of samples are scaled to the CPU time /proc measured for the same window.

const PLUGIN_PACKAGES = ['@fastify/cors', '@fastify/compress'];

/** The parts of a frame's url that matter: the product file under dist/, or the package under node_modules/. */
export function frameOrigin(url) {
  if (!url) return { kind: 'native' };
  if (url.startsWith('node:')) return { kind: 'node', name: url.slice(5) };
  const dist = url.indexOf('/dist/');
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + 14).split('/');
    const name = rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
    return { kind: 'package', name, file: rest.slice(rest[0].startsWith('@') ? 2 : 1).join('/') };
  }
  if (dist >= 0) return { kind: 'product', file: url.slice(dist + 6) };
  return { kind: 'other', name: url.replace(/^file:\/\//, '') };
}

const PRODUCT_STAGES = [
  // src/auth as an entry frame: authorization resumed after an await (the key lookup).
  [/^plugins\/authorize\.js$|^src\/auth\//, 'authorize hook (preHandler: key, permissions, envelope)'],
  [/^plugins\/envelope\.js$/, 'envelope hooks (requireJson onRequest, noStore onSend)'],
  [/^plugins\/request-id\.js$|^src\/http\/request-id\.js$/, 'request-id (genReqId, echo hook)'],
  [/^plugins\/request-guard\.js$/, 'request-guard hook'],
  [/^plugins\/http-habits\.js$/, 'CORS / compress / http-habits hooks'],
  [/^plugins\/http-metrics\.js$/, 'metrics hook (onResponse)'],
  [/^plugins\/shed\.js$/, 'shed hook'],
  [/^plugins\/errors\.js$|^src\/http\/raw-errors\.js$/, 'error handling'],
  [/^src\/logging\//, 'logging (product)'],
];

// Fastify code that continues the request once a hook is done (a callback hook's `done()` runs the next hook and,
// after the last onSend hook, writes the reply, all on the hook's stack): time below such a frame is not the hook's.
const CONTINUATION_FILES = /^lib\/(hooks|handleRequest|route|contentTypeParser|wrapThenable)\.js$/;
const CONTINUATION_REPLY = /^(send|onSend|wrapOnSend|onSendEnd|serialize|preSerialization|sendStream|onErrorHook)/;
const isContinuation = (frame) =>
  frame.origin.kind === 'package' && frame.origin.name === 'fastify' && (CONTINUATION_FILES.test(frame.origin.file) || (/^lib\/reply\.js$/.test(frame.origin.file) && CONTINUATION_REPLY.test(frame.functionName)));
const isOwned = (frame) => frame.origin.kind === 'product' || (frame.origin.kind === 'package' && PLUGIN_PACKAGES.includes(frame.origin.name));

function productStage(frame) {
  if (frame.origin.kind === 'package') return 'CORS / compress / http-habits hooks';
  for (const [pattern, stage] of PRODUCT_STAGES) if (pattern.test(frame.origin.file)) return stage;
  const route = /^routes\/([^/]+)\.js$/.exec(frame.origin.file);
  if (route) return frame.functionName === 'prepareEnvelope' ? `routes/${route[1]}: prepareEnvelope (preValidation)` : `routes/${route[1]}: handler`;
  return `product ${frame.origin.file.split('/').slice(0, 2).join('/')}`;
}

/**
 * The stage a sample belongs to, from its stack (root first): the entry frame (hook, handler) of the innermost
 * run of Fleetplane or plugin code, unless the framework continued the request below it; else what the framework
 * was doing.
 */
export function stageOf(stack) {
  let inner = -1;
  for (let index = stack.length - 1; index >= 0; index -= 1) {
    if (isContinuation(stack[index]) && inner < 0) {
      inner = -2;
      break;
    }
    if (isOwned(stack[index])) {
      inner = index;
      break;
    }
  }
  if (inner >= 0) {
    let entry = inner;
    for (let index = inner - 1; index >= 0 && !isContinuation(stack[index]); index -= 1) if (isOwned(stack[index])) entry = index;
    return productStage(stack[entry]);
  }
  // The framework's own work: below the last Fleetplane frame if there is one.
  let lastOwned = -1;
  stack.forEach((frame, index) => {
    if (isOwned(frame)) lastOwned = index;
  });
  const segment = stack.slice(lastOwned + 1);
  const has = (test) => segment.some(test);
  const leaf = stack[stack.length - 1];
  if (leaf.functionName === '(garbage collector)') return 'GC';
  if (leaf.functionName === '(program)') return 'V8 / native, no JS stack (program)';
  if (has((frame) => frame.origin.kind === 'package' && /^pino|^thread-stream|^sonic-boom/.test(frame.origin.name))) return 'logging (pino)';
  if (has((frame) => frame.origin.name === 'fastify' && /validation\.js$/.test(frame.origin.file))) return 'fastify schema validation (ajv)';
  if (has((frame) => frame.origin.name === 'fast-json-stringify' || (frame.origin.name === 'fastify' && /^serialize/.test(frame.functionName))))
    return 'fastify JSON serialization (fast-json-stringify)';
  if (has((frame) => frame.origin.name === 'secure-json-parse' || (frame.origin.name === 'fastify' && /contentTypeParser\.js$/.test(frame.origin.file))))
    return 'fastify body read + JSON parse';
  if (has((frame) => frame.origin.name === 'fastify' && /^lib\/reply\.js$/.test(frame.origin.file) && /^(onSendEnd|wrapOnSendEnd|send)/.test(frame.functionName)))
    return 'fastify reply write (headers, res.end → socket)';
  if (has((frame) => frame.origin.kind === 'package' && ['fastify', 'find-my-way', 'avvio', '@fastify/error', 'light-my-request', 'fastify-plugin'].includes(frame.origin.name)))
    return 'fastify core (routing, hook runner, request/reply objects)';
  if (has((frame) => frame.origin.kind === 'node')) return 'Node http / net / streams (parser, socket I/O)';
  return 'other';
}

/** What a function is, for the self-time table: `package` or `dist/file`, with the line. */
export function describeFrame(frame) {
  const origin = frame.origin;
  const name = frame.functionName || '(anonymous)';
  const line = frame.lineNumber >= 0 ? `:${frame.lineNumber + 1}` : '';
  if (origin.kind === 'product') return `${name} (${origin.file}${line})`;
  if (origin.kind === 'package') return `${name} (${origin.name}/${origin.file}${line})`;
  if (origin.kind === 'node') return `${name} (node:${origin.name}${line})`;
  if (origin.kind === 'native') return `${name} (native or generated code)`;
  return `${name} (${origin.name}${line})`;
}

/**
 * Per-request microseconds of the samples between `fromUs` and `toUs` (the profile's clock): each part's share of
 * the samples times `cpuUsPerRequest` (the server's CPU time per request in that window, from /proc).
 */
export function analyzeProfile(profile, { fromUs, toUs, requests, cpuUsPerRequest }) {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  for (const node of profile.nodes) node.callFrame.origin = frameOrigin(node.callFrame.url);
  const stacks = new Map();
  const stackOf = (id) => {
    let stack = stacks.get(id);
    if (!stack) {
      stack = [];
      for (let at = id; at !== undefined; at = parents.get(at)) stack.push(nodes.get(at).callFrame);
      stack.reverse();
      // The synthetic root is no function.
      if (stack[0]?.functionName === '(root)') stack.shift();
      stacks.set(id, stack);
    }
    return stack;
  };

  const byStage = new Map();
  const stageAreas = new Map();
  const selfTime = new Map();
  const inclusive = new Map();
  let sampled = 0;
  let idle = 0;
  let time = profile.startTime;
  const { samples, timeDeltas } = profile;
  for (let index = 0; index < samples.length; index += 1) {
    time += timeDeltas[index];
    if (time < fromUs || time > toUs) continue;
    const weight = 1;
    const stack = stackOf(samples[index]);
    const leaf = stack[stack.length - 1];
    if (!leaf || leaf.functionName === '(idle)') {
      idle += weight;
      continue;
    }
    sampled += weight;
    const stage = stageOf(stack);
    byStage.set(stage, (byStage.get(stage) ?? 0) + weight);
    const area = leaf.origin.kind === 'package' ? leaf.origin.name : leaf.origin.kind === 'product' ? `dist/${leaf.origin.file.split('/').slice(0, -1).join('/') || '.'}` : leaf.origin.kind === 'node' ? 'node' : leaf.functionName.startsWith('(') ? leaf.functionName : 'native/generated';
    const areas = stageAreas.get(stage) ?? new Map();
    areas.set(area, (areas.get(area) ?? 0) + weight);
    stageAreas.set(stage, areas);
    const leafName = describeFrame(leaf);
    selfTime.set(leafName, (selfTime.get(leafName) ?? 0) + weight);
    const seen = new Set();
    for (const frame of stack) {
      if (frame.origin.kind !== 'product') continue;
      const name = describeFrame(frame);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + weight);
    }
  }
  const perRequest = (count) => Math.round((count / sampled) * cpuUsPerRequest * 100) / 100;
  const share = (count) => Math.round((count / sampled) * 1000) / 10;
  const sorted = (map, limit) =>
    [...map.entries()]
      .sort((x, y) => y[1] - x[1])
      .slice(0, limit)
      .map(([name, count]) => ({ name, usPerRequest: perRequest(count), percent: share(count) }));
  return {
    requests,
    windowMs: Math.round((toUs - fromUs) / 1000),
    cpuUsPerRequest,
    samples: sampled,
    idleSamples: idle,
    stages: sorted(byStage, 50).map((stage) => ({ ...stage, leafAreas: sorted(stageAreas.get(stage.name), 4) })),
    inclusiveProduct: sorted(inclusive, 40),
    selfTop: sorted(selfTime, 30),
  };
}
