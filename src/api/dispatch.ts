import type { Dispatcher } from 'undici';
import { EgressRefusedError } from './egress-connector.js';
import { API_ERRORS, ApiError } from './errors.js';
import type { UpstreamRequest } from './request.js';

export interface DispatchLimits {
  /** Whole request, connect to last byte. */
  timeoutMs: number;
  maxResponseBytes: number;
  /** Ends the call early (a caller's own deadline); its reason is rethrown as is. */
  signal?: AbortSignal;
}

export interface ApiReply {
  status: number;
  data: unknown;
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

type Body = Dispatcher.ResponseData['body'];

/**
 * A body without a declared length is read as it comes, so an endless one stops at the cap. Events rather than
 * an async iterator: this runs for every chunked reply, and the iterator costs more than the read.
 */
function readCapped(body: Body, maxBytes: number, call: { abandoned: boolean }, tooLarge: () => ApiError): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes || call.abandoned) {
        body.destroy();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    body.once('end', () => resolve(Buffer.concat(chunks, size).toString('utf8')));
    body.once('error', reject);
  });
}

function parseReply(status: number, contentType: string | string[] | undefined, text: string, name: string): ApiReply {
  if (text.length === 0) return { status, data: null };
  const type = Array.isArray(contentType) ? contentType[0] : contentType;
  if (!type || !/[/+]json\b/i.test(type)) return { status, data: text };
  try {
    return { status, data: JSON.parse(text) as unknown };
  } catch {
    throw API_ERRORS.upstreamInvalidReply(name, status);
  }
}

/** The failure of a call that did not finish within the time it was given (which it carries). */
const timedOut = (name: string, limits: DispatchLimits) => API_ERRORS.upstreamTimeout(name, limits.timeoutMs);

async function call(pool: Dispatcher, name: string, request: UpstreamRequest, headers: Record<string, string>, limits: DispatchLimits, state: { abandoned: boolean }): Promise<ApiReply> {
  const tooLarge = () => API_ERRORS.upstreamTooLarge(name, limits.maxResponseBytes);
  let response: Dispatcher.ResponseData;
  try {
    // undici's own timeouts bound a call this side has stopped waiting for, and free its connection.
    response = await pool.request({ method: request.method.toUpperCase() as Dispatcher.HttpMethod, path: request.path, headers, body: request.body, headersTimeout: limits.timeoutMs, bodyTimeout: limits.timeoutMs });
  } catch (error) {
    if (TIMEOUT_CODES.has((error as { code?: string })?.code ?? '')) throw timedOut(name, limits);
    if (error instanceof EgressRefusedError) throw API_ERRORS.egressRefused(name, error.hostname, error.rule);
    throw API_ERRORS.upstreamUnreachable(name);
  }
  const { statusCode, body } = response;
  if (state.abandoned) {
    body.destroy();
    return { status: statusCode, data: null };
  }
  try {
    if (statusCode >= 500) {
      await body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      throw API_ERRORS.upstreamFailed(name, statusCode);
    }
    const declared = Number(response.headers['content-length']);
    if (declared > limits.maxResponseBytes) {
      body.destroy();
      throw tooLarge();
    }
    // A declared length is what the HTTP parser reads, no more: that body can be taken whole.
    const text = Number.isInteger(declared) ? await body.text() : await readCapped(body, limits.maxResponseBytes, state, tooLarge);
    return parseReply(statusCode, response.headers['content-type'], text, name);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    if (TIMEOUT_CODES.has((error as { code?: string })?.code ?? '')) throw timedOut(name, limits);
    throw API_ERRORS.upstreamUnreachable(name, statusCode);
  }
}

/**
 * One upstream call through the provider's pool (SPEC 10.3). The upstream's 5xx, an unreachable upstream, an
 * unreadable or oversized reply are 502; running out of time is 504. 4xx replies are the upstream's answer to the
 * caller and pass through with their status. The deadline is a timer raced against the call rather than an
 * AbortController per request, which costs several times more on this hot path.
 */
export async function dispatch(pool: Dispatcher, name: string, request: UpstreamRequest, headers: Record<string, string>, limits: DispatchLimits): Promise<ApiReply> {
  const { signal } = limits;
  if (signal?.aborted) throw signal.reason;
  const state = { abandoned: false };
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(timedOut(name, limits)), limits.timeoutMs);
    timer.unref();
    if (signal) {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
    }
  });
  const work = call(pool, name, request, headers, limits, state);
  try {
    return await Promise.race([work, stopped]);
  } catch (error) {
    state.abandoned = true;
    work.catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal!.removeEventListener('abort', onAbort);
  }
}
