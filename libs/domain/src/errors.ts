/** Stable ASMTP error codes (ASMTP.md §4) plus the codes Roost's extensions add. */
export type ErrorCode =
  | 'INVALID_JSON'
  | 'PAYLOAD_TOO_LARGE'
  | 'INVALID_REQUEST'
  | 'INVALID_ENVELOPE_ID'
  | 'INVALID_HANDLE'
  | 'INVALID_CONTENT'
  | 'INVALID_MONITOR'
  | 'INVALID_REFERENCES'
  | 'INVALID_FILE'
  | 'INVALID_QUERY'
  | 'INVALID_POLICY'
  | 'INVALID_DISPLAY_NAME'
  | 'INVALID_DESCRIPTION'
  | 'INVALID_CARD_BODY'
  | 'INVALID_VISIBILITY'
  | 'INVALID_UPDATE'
  | 'INVALID_ENTRIES'
  | 'INVALID_ALLOWLIST_ENTRY'
  | 'INVALID_BLOCK_TARGET'
  | 'INVALID_LIMIT'
  | 'INVALID_CURSOR'
  | 'INVALID_ORG'
  | 'INVALID_CONTENT_GUARD'
  | 'INVALID_RETENTION'
  | 'INVALID_QUOTA'
  | 'INVALID_RECEIPT'
  | 'INVALID_SCHEDULE'
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'AGENT_EXISTS'
  | 'ORG_EXISTS'
  | 'ID_COLLISION'
  | 'RETRY_MISMATCH'
  | 'CONTENT_BLOCKED'
  | 'QUOTA_EXCEEDED'
  | 'RATE_LIMITED'
  | 'INTERNAL_ERROR'
  | 'UNAVAILABLE';

/** An error that maps one-to-one onto an ASMTP error response. */
export class AsmtpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    /** Extra members of the `error` object (e.g. `warnings` on CONTENT_BLOCKED). */
    readonly extra?: Record<string, unknown>,
    /** Response headers that go with the error (e.g. `retry-after` on RATE_LIMITED). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AsmtpError';
  }

  body(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.extra } };
  }
}

export const badRequest = (code: ErrorCode, message: string) => new AsmtpError(400, code, message);

/** The one non-enumerating 404 of ASMTP.md §1.9. */
export const notFound = (message = 'not found') => new AsmtpError(404, 'NOT_FOUND', message);

export const unauthorized = (message = 'missing or invalid bearer token') =>
  new AsmtpError(401, 'UNAUTHORIZED', message);

export const unavailable = (message = 'service unavailable') => new AsmtpError(503, 'UNAVAILABLE', message);

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);
// SQLSTATE: 08 connection exception; 57P01-03 shutdown / cannot connect now; 53300 too many
// connections; 57014 statement timeout (a stuck dependency must not pin a request).
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300|57014)$/;
// pg: `Query read timeout` is query_timeout firing (a partition stalls the socket, so the server's
// statement_timeout never answers); `timeout expired` a connect that stalled; `Client was closed`
// a query on a client whose socket just ended.
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable|Query read timeout|^timeout expired$|Connection is closed|Reached the max retries per request|database system is (starting up|shutting down)|Command timed out|connection timeout/i;

/** True when `error` means a dependency (Postgres, Redis) is down or too slow: a 503, not a 500. */
export function isUnavailable(error: unknown, depth = 0): boolean {
  if (error === null || typeof error !== 'object') return false;
  if (error instanceof AsmtpError) return error.status === 503;
  const { code, message, name, cause, errors } = error as {
    code?: unknown;
    message?: unknown;
    name?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true;
  if (name === 'MaxRetriesPerRequestError') return true;
  if (typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)) return true;
  // A wrapper (`new Error(msg, { cause })`, an AggregateError of connect attempts) is what it wraps.
  if (depth >= 3) return false;
  if (isUnavailable(cause, depth + 1)) return true;
  return Array.isArray(errors) && errors.some((inner) => isUnavailable(inner, depth + 1));
}
