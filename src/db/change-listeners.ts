import type { ChangeListener } from './types.js';

/** The `Store.onChange` listeners of one store instance; one listener's failure never stops the others. */
export class ChangeListeners {
  private readonly listeners = new Set<ChangeListener>();

  add(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(collection: string): void {
    for (const listener of this.listeners) {
      try {
        listener(collection);
      } catch {
        // A listener's failure is its own; the write has happened.
      }
    }
  }
}
