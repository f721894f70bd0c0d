import { Duplex } from 'node:stream';
import t from 'tap';
import { answerClientError } from '../../src/http/raw-errors.js';

/** A socket that records what is written to it. */
function fakeSocket(options: { writable?: boolean; inFlight?: { headersSent: boolean } } = {}) {
  const written: string[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk, _encoding, callback) {
      written.push(String(chunk));
      callback();
    },
  });
  socket.on('error', () => {});
  if (options.writable === false) socket.end();
  if (options.inFlight) Object.assign(socket, { _httpMessage: options.inFlight });
  return { socket, written };
}

const parserError = (code: string) => Object.assign(new Error(`Parse Error: ${code}`), { code });

function parse(raw: string) {
  const [head, body] = raw.split('\r\n\r\n');
  const [statusLine, ...lines] = head!.split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine!.split(' ')[1]), statusLine, headers, body: body! };
}

t.test('each client error is a complete HTTP/1.1 answer in the one error shape, then the socket is destroyed', async (t) => {
  const cases: Array<[string, number, string]> = [
    ['HPE_INVALID_METHOD', 400, 'bad_request'],
    ['HPE_INVALID_HEADER_TOKEN', 400, 'bad_request'],
    ['HPE_HEADER_OVERFLOW', 431, 'headers_too_large'],
    ['HPE_CHUNK_EXTENSIONS_OVERFLOW', 413, 'payload_too_large'],
    ['ERR_HTTP_REQUEST_TIMEOUT', 408, 'request_timeout'],
  ];
  for (const [errorCode, status, code] of cases) {
    const { socket, written } = fakeSocket();
    answerClientError(parserError(errorCode), socket);
    t.equal(written.length, 1, errorCode);
    const answer = parse(written[0]!);
    t.match(answer.statusLine, new RegExp(`^HTTP/1\\.1 ${status} [A-Z]`), `${errorCode}: status line`);
    t.equal(answer.headers['cache-control'], 'no-store');
    t.equal(answer.headers.connection, 'close');
    t.match(answer.headers['content-type'], /^application\/json/);
    t.equal(Number(answer.headers['content-length']), Buffer.byteLength(answer.body), 'content-length is the body’s');
    t.match(JSON.parse(answer.body), { error: { code, message: String } });
    t.ok(socket.destroyed, `${errorCode}: destroyed`);
  }
});

t.test('nothing is written where Node and Fastify write nothing', async (t) => {
  const reset = fakeSocket();
  answerClientError(parserError('ECONNRESET'), reset.socket);
  t.same(reset.written, [], 'a reset connection: nothing to answer');
  t.notOk(reset.socket.destroyed, 'and nothing to do');

  const gone = fakeSocket();
  gone.socket.destroy();
  answerClientError(parserError('HPE_INVALID_METHOD'), gone.socket);
  t.same(gone.written, [], 'an already destroyed socket');

  const halfClosed = fakeSocket({ writable: false });
  answerClientError(parserError('HPE_INVALID_METHOD'), halfClosed.socket);
  t.same(halfClosed.written, [], 'a socket that is not writable');
  t.ok(halfClosed.socket.destroyed);

  const busy = fakeSocket({ inFlight: { headersSent: true } });
  answerClientError(parserError('HPE_INVALID_METHOD'), busy.socket);
  t.same(busy.written, [], 'a response already on its way is not corrupted by a second one');
  t.ok(busy.socket.destroyed);

  const idle = fakeSocket({ inFlight: { headersSent: false } });
  answerClientError(parserError('HPE_INVALID_METHOD'), idle.socket);
  t.equal(idle.written.length, 1, 'a response not started yet does not stop the answer');
});
