import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

/**
 * The smallest HTTP layer that does the job: node:http(s), no fetch. `fetch` loads undici on first
 * use, which costs a short-lived CLI process more than the request itself.
 */

/** Why a request failed, in the terms a caller acts on. */
export type RoostErrorKind = 'api' | 'unreachable' | 'timeout' | 'protocol';

export class RoostError extends Error {
  constructor(
    readonly kind: RoostErrorKind,
    message: string,
    /** HTTP status for `api` errors, 0 otherwise. */
    readonly status = 0,
    /** ASMTP error code (`NOT_FOUND`, `UNAUTHORIZED`, …), or `http_<status>` without one. */
    readonly code = kind === 'api' ? `http_${status}` : kind.toUpperCase(),
    /** Extra fields of the error body (e.g. content guard `warnings`). */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'RoostError';
  }
}

export interface HttpRequest {
  method: string;
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** JSON-serialised unless a Buffer (sent as is, with `headers['content-type']`). */
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A request as it goes on the wire, for a custom `dispatch`. */
export interface WireRequest {
  method: string;
  url: URL;
  headers: Record<string, string | number>;
  body?: Buffer;
  timeoutMs: number;
}

export interface TransportOptions {
  /** Per-request timeout (default 30 s). */
  timeoutMs?: number;
  userAgent?: string;
  /**
   * Sends a request instead of node:http(s): e.g. an in-process HTTP injection on the operator
   * itself (its MCP endpoint). It answers with the status, headers and body as received.
   */
  dispatch?: (request: WireRequest) => Promise<HttpResponse>;
}

/** Base URL + bearer plumbing shared by the agent and admin clients. */
export class Transport {
  readonly base: URL;

  constructor(
    baseUrl: string,
    private readonly options: TransportOptions = {},
  ) {
    this.base = new URL(baseUrl.endsWith('/') ? baseUrl.slice(0, -1) : baseUrl);
  }

  get baseUrl(): string {
    return this.base.toString().replace(/\/$/, '');
  }

  url(path: string, query?: HttpRequest['query']): URL {
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    return url;
  }

  send(req: HttpRequest): Promise<HttpResponse> {
    const url = this.url(req.path, req.query);
    const headers: Record<string, string | number> = {
      accept: 'application/json',
      'user-agent': this.options.userAgent ?? `roost-client node/${process.versions.node}`,
      ...req.headers,
    };
    if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
    let payload: Buffer | undefined;
    if (Buffer.isBuffer(req.body)) payload = req.body;
    else if (req.body !== undefined) {
      payload = Buffer.from(JSON.stringify(req.body));
      headers['content-type'] = 'application/json';
    }
    if (payload) headers['content-length'] = payload.length;
    const timeoutMs = req.timeoutMs ?? this.options.timeoutMs ?? 30_000;
    if (this.options.dispatch)
      return this.options.dispatch({ method: req.method, url, headers, body: payload, timeoutMs });
    // node:https (and TLS) load only for https URLs: a loopback CLI call stays cheap.
    const requester =
      url.protocol === 'https:'
        ? // eslint-disable-next-line @typescript-eslint/no-require-imports -- TLS loads only for https URLs
          (require('node:https') as typeof import('node:https')).request
        : httpRequest;
    return new Promise((resolve, reject) => {
      const outgoing = requester(url, { method: req.method, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', (error) => reject(networkError(error, this.baseUrl)));
      });
      outgoing.setTimeout(timeoutMs, () => {
        outgoing.destroy(new RoostError('timeout', `no answer from ${this.baseUrl} within ${timeoutMs} ms`));
      });
      outgoing.on('error', (error) => reject(error instanceof RoostError ? error : networkError(error, this.baseUrl)));
      outgoing.end(payload);
    });
  }

  /** A JSON call: 2xx → parsed body (`undefined` for 204), anything else → `RoostError('api')`. */
  async json<T>(req: HttpRequest): Promise<T> {
    const res = await this.send(req);
    if (res.status < 200 || res.status > 299) throw apiError(res);
    if (res.status === 204 || res.body.length === 0) return undefined as T;
    try {
      return JSON.parse(res.body.toString('utf8')) as T;
    } catch {
      throw new RoostError(
        'protocol',
        `${req.method} ${req.path}: the operator answered ${res.status} with a body that is not JSON`,
      );
    }
  }
}

function networkError(error: Error & { code?: string }, base: string): RoostError {
  const code = error.code ?? '';
  if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE'].includes(code)) {
    return new RoostError('unreachable', `cannot reach the operator at ${base} (${code})`);
  }
  return new RoostError('unreachable', `request to ${base} failed: ${error.message}`);
}

/** ASMTP error body `{"error":{"code","message"}}`, tolerating `{"error":"CODE"}` and `{"detail":…}` (§4). */
export function apiError(res: HttpResponse): RoostError {
  let code = `http_${res.status}`;
  let message = `HTTP ${res.status}`;
  let details: Record<string, unknown> = {};
  try {
    const body = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
    const error = body.error;
    if (error && typeof error === 'object') {
      const e = error as Record<string, unknown>;
      if (typeof e.code === 'string') code = e.code;
      if (typeof e.message === 'string') message = e.message;
      const { code: _c, message: _m, ...rest } = e;
      details = rest;
    } else if (typeof error === 'string') {
      code = error;
    } else if (body.detail !== undefined) {
      message = typeof body.detail === 'string' ? body.detail : JSON.stringify(body.detail);
    }
  } catch {
    // not JSON: keep the status
  }
  const retryAfter = res.headers['retry-after'];
  if (retryAfter !== undefined) details.retry_after_s = Number(retryAfter);
  return new RoostError('api', message, res.status, code, details);
}
