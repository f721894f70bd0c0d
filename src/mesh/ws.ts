import { createRequire } from 'node:module';
import type { default as WebSocket, WebSocketServer } from 'ws';

// The WebSocket library is loaded when the mesh first listens or dials, not with the server: a server that
// has no mesh port and no peer never holds it. `require` resolves the same build `import` would.
const require = createRequire(import.meta.url);
/** What `require('ws')` returns: the WebSocket class, with the server class on it. */
type WsLibrary = typeof WebSocket & { WebSocketServer: typeof WebSocketServer };
let loaded: WsLibrary | undefined;

/** The `ws` package (its WebSocket class, with `WebSocketServer` on it), loaded on first use. */
export const ws = (): WsLibrary => (loaded ??= require('ws') as WsLibrary);

/** `WebSocket.CONNECTING` and `WebSocket.OPEN`, the protocol's ready states, without loading the library. */
export const CONNECTING = 0;
export const OPEN = 1;
