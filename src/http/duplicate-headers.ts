/**
 * Headers whose duplicates make a request ambiguous. Node's parser keeps only the first `Host` and the first
 * `Authorization` in `request.headers`, while a proxy in front may have acted on the last one: the organization
 * and the key we would authorize would then not be those the client and the proxy agreed on.
 */
export type AmbiguousHeader = 'Host' | 'Authorization';

/** True when `name` is `lower` in any letter case; both are ASCII letters only, and nothing is allocated. */
function isNamed(name: string, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    if ((name.charCodeAt(i) | 0x20) !== lower.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * The first of `Host` or `Authorization` that a request carries more than once, else undefined. Runs on every
 * request: it looks only at the names' lengths until one could match, and allocates nothing.
 */
export function duplicatedHeader(rawHeaders: readonly string[]): AmbiguousHeader | undefined {
  let hosts = 0;
  let authorizations = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4) {
      if (isNamed(name, 'host') && ++hosts > 1) return 'Host';
    } else if (name.length === 13) {
      if (isNamed(name, 'authorization') && ++authorizations > 1) return 'Authorization';
    }
  }
  return undefined;
}

export const duplicateHeaderMessage = (name: AmbiguousHeader) => `the ${name} header may appear only once`;
