import type { Document, Store } from '../db/types.js';
import { isSealed } from './box.js';
import { SecretUnreadableError } from './errors.js';
import { SECRET_COLLECTIONS, secretsIn, transformDocument } from './fields.js';
import { sealedKeyId, type SecretKeyring } from './keyring.js';

/** A stored secret named for an operator: never its value. */
export interface SecretLocation {
  organization_id: string;
  collection: string;
  name: string;
  field: string;
}

/** What the store holds: how many secrets are plaintext, and how many each key sealed. */
export interface SecretCensus {
  plaintext: number;
  byKey: Map<string, number>;
}

export interface SweepResult {
  /** Secrets written again, sealed with the sealing key. */
  resealed: number;
  /** Of those, the ones that were stored in plain text (by a version before sealing). */
  plaintext: number;
  /** Secrets that could not be opened, left as they are. */
  unreadable: SecretLocation[];
}

/** A document keeps changing under the sweep (attempts, each re-read after a concurrent write). */
const ATTEMPTS_PER_DOCUMENT = 5;

const locationOf = (collection: string, document: Document, path: string[]): SecretLocation => ({
  organization_id: String(document.organization_id ?? ''),
  collection,
  name: String(document.name ?? document._id),
  field: path.join('.'),
});

async function everyDocument(store: Store, visit: (collection: string, document: Document) => Promise<void>): Promise<void> {
  for (const collection of SECRET_COLLECTIONS) {
    for (const document of await store.collection(collection).find({})) await visit(collection, document);
  }
}

/** Counts the stored secrets of every organization by how they are stored (an unparsable sealed value counts under ""). */
export async function secretCensus(store: Store): Promise<SecretCensus> {
  const census: SecretCensus = { plaintext: 0, byKey: new Map() };
  await everyDocument(store, async (collection, document) => {
    for (const { value } of secretsIn(collection, document)) {
      if (!isSealed(value)) census.plaintext += 1;
      else {
        const keyId = sealedKeyId(value) ?? '';
        census.byKey.set(keyId, (census.byKey.get(keyId) ?? 0) + 1);
      }
    }
  });
  return census;
}

/**
 * Seals again, with the keyring's sealing key, each stored secret `stale` picks (after opening it with any key
 * of the keyring). A document is rewritten only if the secret-holding field is still what was read, so a write
 * made meanwhile (a tenant's update, another server's sweep) is never overwritten: the document is read again.
 */
export async function resealSecrets(store: Store, keyring: SecretKeyring, stale: (value: string) => boolean): Promise<SweepResult> {
  const result: SweepResult = { resealed: 0, plaintext: 0, unreadable: [] };
  await everyDocument(store, async (collection, stored) => {
    let document: Document | null = stored;
    for (let attempt = 0; document; attempt += 1) {
      if (attempt === ATTEMPTS_PER_DOCUMENT) throw new Error(`${collection} "${String(stored.name)}" kept changing while its secrets were sealed again; run again`);
      const found = secretsIn(collection, document).filter(({ value }) => stale(value));
      if (found.length === 0) return;
      const organizationId = String(document.organization_id ?? '');
      const replaced = new Map<string, string>();
      const unreadable: SecretLocation[] = [];
      for (const { path, value } of found) {
        const place = { organizationId, collection, path };
        try {
          replaced.set(path.join('\0'), keyring.seal(keyring.open(value, place), place));
        } catch (error) {
          if (!(error instanceof SecretUnreadableError)) throw error;
          unreadable.push(locationOf(collection, document, path));
        }
      }
      if (replaced.size > 0) {
        // Every secret of a collection lives under one top-level field (`headers`, `verify`).
        const root = found[0]!.path[0]!;
        const next = transformDocument(collection, document, (value, path) => replaced.get(path.join('\0')) ?? value, false);
        const written = await store.collection(collection).updateOne({ _id: document._id, [root]: document[root] }, { $set: { [root]: next[root] } });
        if (written.matchedCount === 0) {
          document = await store.collection(collection).findOne({ _id: document._id });
          continue;
        }
        result.resealed += replaced.size;
        result.plaintext += found.filter(({ path, value }) => replaced.has(path.join('\0')) && !isSealed(value)).length;
      }
      result.unreadable.push(...unreadable);
      return;
    }
  });
  return result;
}
