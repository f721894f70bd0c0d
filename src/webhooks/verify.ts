import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { HmacVerification, TokenVerification } from './definition.js';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

const sha256 = (value: string | Buffer) => createHash('sha256').update(value).digest();

/**
 * SPEC 12.1: the sender's proof, checked on the raw body bytes before anything parses them. Both sides are
 * hashed to equal lengths first, so the comparison takes the same time whatever was sent.
 */
export function verifyDelivery(verify: HmacVerification | TokenVerification, headers: Headers, rawBody: Buffer): boolean {
  const presented = headers[verify.header.toLowerCase()];
  if (typeof presented !== 'string' || presented.length === 0) return false;
  const expected = verify.scheme === 'token' ? verify.secret : (verify.prefix ?? '') + createHmac('sha256', verify.secret).update(rawBody).digest('hex');
  return timingSafeEqual(sha256(presented), sha256(expected));
}
