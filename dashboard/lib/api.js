// Talks to the server the page came from: `POST /control` with the signed-in key as a Bearer token.
// The key never goes into a URL, a log line or an error message.

/** An answer the server refused (HTTP status with `{ error: { code, message } }`), or a target's error. */
export class ControlError extends Error {
  constructor(code, message, status = 0) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

/** What a refused sign-in tells the operator: never anything about other organizations. */
export function signInMessage(error) {
  if (error.code === 'permission_denied') return 'This platform key may not read the overview: it needs the overview.* permission (an admin key has it).';
  if (error.code === 'too_many_requests') return `Too many failed sign-ins from this address. ${error.message}`;
  if (error.code === 'network') return 'The server cannot be reached. Check that it is running and try again.';
  if (error.status === 401 || error.status === 403) return `Platform key required: this key is not accepted here (${error.message}).`;
  return `The server refused the sign-in: ${error.message}`;
}

export class ControlClient {
  constructor(key) {
    this.key = key;
  }

  /** Sends one envelope and answers the replies of its targets (`{ id, replies, missing }`). */
  async send(envelope) {
    let response;
    try {
      response = await fetch('/control', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.key}` },
        body: JSON.stringify(envelope),
        cache: 'no-store',
        credentials: 'omit',
      });
    } catch {
      throw new ControlError('network', 'the server cannot be reached');
    }
    let body;
    try {
      body = await response.json();
    } catch {
      throw new ControlError('bad_reply', `the server answered ${response.status} without JSON`, response.status);
    }
    if (!response.ok) {
      const error = body && body.error ? body.error : { code: 'http_error', message: `HTTP ${response.status}` };
      throw new ControlError(error.code, error.message, response.status);
    }
    return body;
  }

  /** The one reply of an envelope with one target; its error (or its absence) is thrown. */
  async one(envelope) {
    const result = await this.send(envelope);
    const reply = result.replies[0];
    if (!reply) throw new ControlError('no_answer', `${describeTarget(envelope)} did not answer in time`);
    if (!reply.ok) throw new ControlError(reply.error?.code ?? 'failed', reply.error?.message ?? 'the action failed');
    return reply.result;
  }

  /** An action: every target must answer without an error. */
  async act(envelope) {
    const result = await this.send(envelope);
    const failed = result.replies.find((reply) => !reply.ok);
    if (failed) throw new ControlError(failed.error?.code ?? 'failed', `${failed.server}${failed.worker ? ` worker ${failed.worker}` : ''}: ${failed.error?.message ?? 'failed'}`);
    if (result.missing.length > 0) {
      const who = result.missing.map((entry) => (entry.worker ? `${entry.server} worker ${entry.worker}` : entry.server)).join(', ');
      throw new ControlError('no_answer', `no answer in time from ${who}`);
    }
    return result;
  }
}

function describeTarget(envelope) {
  if (envelope.worker !== undefined) return `worker ${envelope.worker} of ${envelope.server ?? 'this server'}`;
  return envelope.server ? `server ${envelope.server}` : 'this server';
}
