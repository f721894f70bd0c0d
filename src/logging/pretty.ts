import type { DestinationStream } from 'pino';

/** How log records are written: one JSON object per line (for collectors), or one readable line (for people). */
export type LogFormat = 'json' | 'pretty';

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every record has, shown in the line's head (time, level, where) or not at all. */
const HEAD_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'server', 'worker', 'v']);
/** A field whose value is longer than this reads as noise on a terminal: it is named, its value left out. */
const MAX_VALUE_CHARS = 100;

/**
 * `auto` is `pretty` when the records go to a terminal, `json` otherwise. Decided once, by the primary, on its
 * own stdout: workers are handed the decision with their config (their stdout is not always the primary's).
 */
export function resolveLogFormat(configured: 'auto' | LogFormat, stdout: { isTTY?: boolean } = process.stdout): LogFormat {
  if (configured !== 'auto') return configured;
  return stdout.isTTY ? 'pretty' : 'json';
}

const pad = (value: number, width = 2) => String(value).padStart(width, '0');

function clock(time: unknown): string {
  const date = new Date(typeof time === 'string' || typeof time === 'number' ? time : Date.now());
  if (Number.isNaN(date.getTime())) return String(time);
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

/** A terminal must never receive a record's control characters (an escape sequence in a logged header, say). */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
const escapeControl = (text: string) => text.replace(CONTROLS, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** A random server id (a UUID) is long; its first eight characters tell servers apart on one terminal. */
const shortServer = (id: unknown) => (typeof id === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) ? id.slice(0, 8) : String(id));

function scalar(value: unknown): string {
  // A duration of 9.109748999999965 ms reads as 9.11: the JSON form keeps every digit.
  if (typeof value === 'number' && !Number.isInteger(value)) return String(Math.round(value * 100) / 100);
  if (typeof value === 'string') return value === '' || /[\s="\\]/.test(value) || CONTROL.test(value) ? JSON.stringify(value) : value;
  return JSON.stringify(value) ?? String(value);
}

/** `key=value` for a field of the record; a value too long for a line is only named. */
function field(key: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (key === 'req' && typeof value === 'object' && value !== null) {
    const { method, url } = value as { method?: string; url?: string };
    return `req=${scalar(`${method ?? ''} ${url ?? ''}`.trim())}`;
  }
  if (key === 'res' && typeof value === 'object' && value !== null) return `status=${scalar((value as { statusCode?: number }).statusCode)}`;
  const text = scalar(value);
  return text.length > MAX_VALUE_CHARS ? `${key}=${typeof value === 'object' && value !== null ? (Array.isArray(value) ? '[…]' : '{…}') : '…'}` : `${key}=${text}`;
}

interface LoggedError {
  type?: string;
  message?: string;
  code?: string;
  stack?: string;
}

/**
 * One record as a person reads it: `14:02:07.311 INFO  node-a/primary  fleetplane started  workers=2 …`. The
 * fields are the record's own (its context and event fields), after the same redaction as the JSON form: the
 * logger redacts before anything reaches the destination. An error's stack follows, indented, only at error
 * level and above: a warning's error is its message.
 */
export function prettyLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof record.level === 'number' ? record.level : 30;
  const where = `${shortServer(record.server)}/${record.worker === 0 || record.worker === undefined ? 'primary' : `w${String(record.worker)}`}`;
  const parts = [clock(record.time), (LEVELS[level] ?? String(record.level)).padEnd(5), record.server === undefined ? undefined : escapeControl(where), escapeControl(String(record.msg ?? ''))];
  const fields: string[] = [];
  // A record about another process carries its pid after the emitting one's: the parsed record holds the last.
  const ownPid = /"pid":(\d+)/.exec(json)?.[1];
  const otherPid = record.pid !== undefined && String(record.pid) !== ownPid ? `pid=${scalar(record.pid)}` : undefined;
  let stack: string | undefined;
  for (const [key, value] of Object.entries(record)) {
    if (HEAD_FIELDS.has(key)) continue;
    if (key === 'targetWorker') {
      // The head names the emitting process; the worker a record is about reads as `worker`.
      fields.push(`worker=${scalar(value)}`);
      continue;
    }
    if (key === 'err' && typeof value === 'object' && value !== null) {
      const error = value as LoggedError;
      fields.push(escapeControl(`error=${scalar(`${error.code ? `${error.code}: ` : ''}${error.message ?? error.type ?? 'error'}`)}`));
      if (level >= 50 && error.stack) stack = error.stack;
      continue;
    }
    const shown = field(key, value);
    if (shown) fields.push(escapeControl(shown));
  }
  if (otherPid) fields.push(otherPid);
  const [time, levelName, ...rest] = parts.filter((part) => part !== undefined && part !== '');
  let line = `${time} ${levelName} ${rest.join('  ')}`;
  if (fields.length > 0) line += `  ${fields.join(' ')}`;
  if (stack) line += stack.split('\n').map((stackLine) => `\n    ${escapeControl(stackLine)}`).join('');
  return `${line}\n`;
}

interface Target {
  write(chunk: string): unknown;
  flush?(callback?: (error?: Error) => void): void;
  flushSync?(): void;
}

/** A pino destination writing each record as `prettyLine` to `target` (stdout's stream unless given). */
export function prettyDestination(target: Target): DestinationStream {
  const stream: DestinationStream & Partial<Target> = {
    write: (line: string) => {
      // pino writes one record per call; a chunk may still hold several lines.
      let out = '';
      for (const record of line.split('\n')) if (record !== '') out += prettyLine(record);
      target.write(out);
    },
  };
  if (target.flush) stream.flush = (callback) => target.flush!(callback);
  if (target.flushSync) stream.flushSync = () => target.flushSync!();
  return stream;
}
