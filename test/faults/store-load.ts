import http from 'node:http';

/** One answered request of a load run; `status` 0 when the connection failed or no answer came in time. */
export interface LoadAnswer {
  kind: 'write' | 'read' | 'probe' | 'ready' | 'api';
  /** The written document's name (writes). */
  name?: string;
  startedAt: number;
  endedAt: number;
  status: number;
  code?: string;
  retryAfter?: string;
}

/** One request to 127.0.0.1:`port`; resolves with its answer however it ends (no answer in `timeoutMs` is status 0). */
export function send(port: number, kind: LoadAnswer['kind'], options: { path: string; key?: string; body?: unknown; name?: string; timeoutMs?: number }): Promise<LoadAnswer> {
  const startedAt = Date.now();
  const text = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: http.OutgoingHttpHeaders = { host: 'localhost' };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (text !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  return new Promise((resolve) => {
    const done = (fields: Pick<LoadAnswer, 'status' | 'code' | 'retryAfter'>) => resolve({ kind, name: options.name, startedAt, endedAt: Date.now(), ...fields });
    const request = http.request({ host: '127.0.0.1', port, path: options.path, method: text === undefined ? 'GET' : 'POST', headers, agent: false }, (response) => {
      let data = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (data += chunk));
      response.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(data) as { error?: { code?: string } }).error?.code;
        } catch {
          code = 'unparsable';
        }
        const retryAfter = response.headers['retry-after'];
        done({ status: response.statusCode!, code, retryAfter });
      });
    });
    request.setTimeout(options.timeoutMs ?? 60_000, () => request.destroy(new Error(`no answer within ${options.timeoutMs ?? 60_000} ms`)));
    request.on('error', (error) => done({ status: 0, code: error.message }));
    request.end(text);
  });
}

export interface StoreLoad {
  readonly answers: LoadAnswer[];
  /** Stops issuing; resolves once every request issued has its answer. */
  stop(): Promise<LoadAnswer[]>;
}

/**
 * Clients writing one document each through /crud, named `<prefix>-<n>` (`writers` loops, each sending its next
 * write when the last is answered), reading, calling the provider `api` names (an /api envelope) when given, and
 * probing /healthz and /readyz, until stopped.
 */
export function storeLoad(port: number, key: string, options: { collection: string; prefix: string; writers?: number; api?: Record<string, unknown> }): StoreLoad {
  const answers: LoadAnswer[] = [];
  let running = true;
  let written = 0;
  const loop = async (next: () => Promise<LoadAnswer>, pauseMs: number) => {
    while (running) {
      answers.push(await next());
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  const write = () => {
    const name = `${options.prefix}-${++written}`;
    return send(port, 'write', { path: '/crud', key, name, body: { method: 'object.create', collection: options.collection, documents: [{ name }] } });
  };
  const read = () => send(port, 'read', { path: '/crud', key, body: { method: 'object.read', collection: options.collection, filter: { name: `${options.prefix}-1` } } });
  const loops = [
    ...Array.from({ length: options.writers ?? 3 }, () => loop(write, 0)),
    loop(read, 50),
    ...(options.api ? [loop(() => send(port, 'api', { path: '/api', key, body: options.api }), 50)] : []),
    loop(() => send(port, 'probe', { path: '/healthz' }), 100),
    loop(() => send(port, 'ready', { path: '/readyz' }), 100),
  ];
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
      return answers;
    },
  };
}

/** Counts of `answers` by kind and status (`write 503 store_unavailable: 12`), for a test's comment and asserts. */
export function tally(answers: readonly LoadAnswer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const answer of answers) {
    const label = `${answer.kind} ${answer.status}${answer.status === 200 ? '' : ` ${answer.code ?? ''}`}`;
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
}
