/** The mesh's events (for observability) and the one payload each carries. */
export interface MeshEvents {
  /** A link is usable: the peer's hello arrived. */
  'link:open': [link: { peer: string; direction: 'in' | 'out' }];
  'link:close': [link: { peer: string; direction: 'in' | 'out'; code: number; reason: string }];
  /** SPEC 6.3: a dialer waits `delayMs` before its next attempt. */
  reconnect: [retry: { peer: string; attempt: number; delayMs: number; code?: number }];
  /** A dialer used up its attempts until the next discovery. */
  giveup: [dialer: { peer: string; attempts: number }];
  /** A peer's upgrade was refused before any WebSocket existed (`status` 0: the TLS handshake failed). */
  refused: [refusal: { status: number; reason: string; peer?: string; remote?: string }];
}
