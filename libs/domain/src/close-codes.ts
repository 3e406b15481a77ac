/**
 * WebSocket close codes of `/connect` (RFC 6455 §7.4, EXTENSIONS.md §1). The SDK keeps its own
 * copies (libs/client/src/listener.ts) so it stands alone; a spec holds them equal.
 */
export const CLOSE_CODES = {
  /** Policy violation: a socket that reached the gateway without a checked handshake. */
  unauthenticated: 1008,
  /** Delivery failed on the server side; the client resumes from its cursor. */
  internalError: 1011,
  /** Drain (SIGTERM): reconnect to another node at once. */
  serviceRestart: 1012,
  /** The token was rotated or the agent deleted (EXTENSIONS.md §9.2.9). */
  revoked: 4001,
  /** The send buffer stayed past its bound; resume from the cursor. */
  slowConsumer: 4008,
} as const;

export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];
