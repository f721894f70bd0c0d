import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { embeddedStorePath, storeBackendOf, type StoreConfig } from '../db/open.js';
import { KEY_BYTES } from './box.js';
import { SecretKeyError } from './errors.js';

export const SECRETS_KEY_FILE = 'secrets.key';

const HEADER = [
  '# Fleetplane secrets key: seals provider and webhook secrets in the store. Keep it mode 0600, and back it up',
  '# with the store: without it the sealed secrets cannot be read. The first key seals; every key listed opens',
  '# (there is more than one only while "fleetplane keys rotate-secrets" runs).',
];

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException)?.code ?? 'error';

/**
 * Where the key lives: beside the embedded store file it unlocks (by default `<data-dir>/secrets.key`; servers
 * sharing one `db.path` share its key too), and `<data-dir>/secrets.key` for PostgreSQL and MongoDB.
 */
export function secretsKeyFile(config: StoreConfig): string {
  const directory = storeBackendOf(config) === 'embedded' ? path.dirname(embeddedStorePath(config)) : config.dataDir;
  return path.join(directory, SECRETS_KEY_FILE);
}

/** 32 bytes as 64 hex digits or as base64 (standard or URL-safe, padding optional); undefined otherwise. */
export function parseKeyText(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed, 'base64');
  // 43 characters carry 258 bits: only the encoding of a 32-byte key, spare bits zero, is a key.
  const canonical = key.toString('base64').replace(/=$/, '');
  return key.length === KEY_BYTES && canonical === trimmed.replace(/=$/, '').replaceAll('-', '+').replaceAll('_', '/') ? key : undefined;
}

function parseKeyFile(text: string, file: string): Buffer[] {
  const keys: Buffer[] = [];
  for (const [index, line] of text.split('\n').entries()) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const key = parseKeyText(trimmed);
    if (!key) throw new SecretKeyError(`${file}: line ${index + 1} is not a 32-byte key (base64 or hex)`, 'file');
    if (!keys.some((known) => known.equals(key))) keys.push(key);
  }
  if (keys.length === 0) throw new SecretKeyError(`${file} holds no key`, 'file');
  return keys;
}

/** The keys of a key file (the sealing one first) and the version of the file they were read from. */
export interface KeyFileContent {
  keys: Buffer[];
  stamp: string;
}

const stampOf = (stat: { ino: number; size: number; mtimeMs: number; ctimeMs: number }) => `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;

/** The file's keys, first the one that seals; undefined when there is no file. */
export function readKeyFile(file: string): KeyFileContent | undefined {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw new SecretKeyError(`cannot read the secrets key file ${file} (${errorCode(error)})`, 'file', { cause: error });
  }
  let text: string;
  let stamp: string;
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new SecretKeyError(`${file} is not a regular file`, 'file');
    // As ssh does with private keys: a key others can read is refused rather than used.
    if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0) {
      const mode = (stat.mode & 0o777).toString(8).padStart(4, '0');
      throw new SecretKeyError(`${file} is open to other users (mode ${mode}); run "chmod 600 ${file}"`, 'file');
    }
    stamp = stampOf(stat);
    text = readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
  return { keys: parseKeyFile(text, file), stamp };
}

/** Identifies one version of the file: a rename or a rewrite changes it. Undefined when there is no file. */
export function keyFileStamp(file: string): string | undefined {
  try {
    return stampOf(statSync(file));
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw new SecretKeyError(`cannot read the secrets key file ${file} (${errorCode(error)})`, 'file', { cause: error });
  }
}

/** A complete, synced 0600 file beside `file`, for a link or a rename to put in place. */
function writeTemporary(file: string, keys: Buffer[]): string {
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const fd = openSync(temporary, 'wx', 0o600);
    try {
      writeSync(fd, `${[...HEADER, ...keys.map((key) => key.toString('base64'))].join('\n')}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    removeQuietly(temporary);
    throw new SecretKeyError(`cannot write the secrets key file ${file} (${errorCode(error)})`, 'file', { cause: error });
  }
  return temporary;
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // never created, or already gone
  }
}

/**
 * Creates the file with one new random key, or reads the one another process made first. The key is written
 * to a temporary file and linked into place: the file appears complete, never half-written, and a link,
 * unlike a rename, fails when the name exists, so two processes starting at once agree on one key.
 */
export function createKeyFile(file: string): KeyFileContent {
  const temporary = writeTemporary(file, [randomBytes(KEY_BYTES)]);
  try {
    linkSync(temporary, file);
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw new SecretKeyError(`cannot create the secrets key file ${file} (${errorCode(error)})`, 'file', { cause: error });
  } finally {
    removeQuietly(temporary);
  }
  const content = readKeyFile(file);
  if (!content) throw new SecretKeyError(`the secrets key file ${file} disappeared as it was created`, 'file');
  return content;
}

/** Replaces the file's keys at once (rename over it): a reader sees the old file or the new one. */
export function replaceKeyFile(file: string, keys: Buffer[]): void {
  const temporary = writeTemporary(file, keys);
  try {
    renameSync(temporary, file);
  } catch (error) {
    removeQuietly(temporary);
    throw new SecretKeyError(`cannot replace the secrets key file ${file} (${errorCode(error)})`, 'file', { cause: error });
  }
  try {
    // The rename is durable once the directory is: without this a crash could bring the old file back.
    const directory = openSync(path.dirname(file), 'r');
    try {
      fsyncSync(directory);
    } finally {
      closeSync(directory);
    }
  } catch {
    // Not every platform syncs a directory; the rename itself is still atomic.
  }
}
