import type { Store } from '../../src/db/types.js';

export interface CuttableLink {
  /** From now on every call waits: no answer, no error, as a store behind a dropped network link. */
  cut(): void;
  /** The link is back: the calls made meanwhile reach the store in the order they were made (late). */
  restore(): void;
  /** The store as the process on the other side of the link reaches it. */
  store: Pick<Store, 'collection'>;
}

/**
 * A store one holder reaches through a link the test can cut. A write sent while the link is cut arrives once it
 * is back: what a process whose packets were held up in the network, or which was paused, sends late.
 */
export function cuttableStore(over: Pick<Store, 'collection'>): CuttableLink {
  let waiting: Array<() => void> | undefined;
  return {
    cut: () => void (waiting ??= []),
    restore: () => {
      const held = waiting ?? [];
      waiting = undefined;
      for (const resume of held) resume();
    },
    store: {
      collection: <T extends { _id: string }>(name: string) => {
        const real = over.collection<T & Record<string, unknown>>(name);
        return new Proxy(real, {
          get: (target, property, receiver) => {
            const value = Reflect.get(target, property, receiver) as unknown;
            if (typeof value !== 'function') return value;
            return async (...args: unknown[]) => {
              if (waiting) await new Promise<void>((resume) => waiting!.push(resume));
              return (value as (...given: unknown[]) => unknown).apply(target, args);
            };
          },
        }) as never;
      },
    },
  };
}
