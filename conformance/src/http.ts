import { responseSchemaFor, responseViolations } from '#schemas';
import { causeText, Failure, show } from './assert';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Reply<T = any> {
  method: string;
  path: string;
  status: number;
  headers: Headers;
  /** The body as text (UTF-8). */
  text: string;
  /** Raw bytes of the body. */
  bytes: Buffer;
  /** Parsed JSON for a JSON content type, else the text. */
  body: T;
}

export interface RequestOptions {
  /** Agent or admin bearer, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** A JSON value (serialised) or a string/Buffer sent as is. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Check the body against the route's wire schema (default true). */
  validate?: boolean;
  /** Retry a 429 after its Retry-After (default true; the rate-limit test turns it off). */
  retryRateLimited?: boolean;
}

export interface HttpStats {
  requests: number;
  retried429: number;
}

/**
 * A black-box HTTP client: plain `fetch`, and every response checked against the wire schema of
 * its route (libs/schemas `responseSchemaFor`), or the error schema for any 4xx/5xx. A schema
 * violation is a Failure of the test that made the request.
 */
export class Http {
  readonly stats: HttpStats = { requests: 0, retried429: 0 };

  constructor(
    readonly baseUrl: string,
    private readonly timeoutMs = 30_000,
  ) {}

  url(path: string): string {
    return this.baseUrl + path;
  }

  async request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | Buffer | undefined;
    if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) body = options.body;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      if (!Object.keys(headers).some((key) => key.toLowerCase() === 'content-type'))
        headers['content-type'] = 'application/json';
    }
    for (let attempt = 0; ; attempt++) {
      this.stats.requests++;
      let response: Response;
      try {
        response = await fetch(this.url(path), {
          method,
          headers,
          body,
          redirect: 'manual',
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (error) {
        throw new Failure(`${method} ${path}: no HTTP response (${causeText(error)})`, { cause: error });
      }
      const bytes = Buffer.from(await response.arrayBuffer());
      if (response.status === 429 && options.retryRateLimited !== false && attempt < 5 && rateLimited(bytes)) {
        this.stats.retried429++;
        const seconds = Number(response.headers.get('retry-after') ?? '1');
        await sleep(Math.min(5_000, Math.max(100, (Number.isFinite(seconds) ? seconds : 1) * 1000)));
        continue;
      }
      const reply = parse<T>(method, path, response, bytes);
      if (options.validate !== false) check(reply);
      return reply;
    }
  }

  get<T = any>(path: string, token?: string, options: RequestOptions = {}) {
    return this.request<T>('GET', path, { ...options, token });
  }

  post<T = any>(path: string, body: unknown, token?: string, options: RequestOptions = {}) {
    return this.request<T>('POST', path, { ...options, token, body });
  }

  patch<T = any>(path: string, body: unknown, token?: string, options: RequestOptions = {}) {
    return this.request<T>('PATCH', path, { ...options, token, body });
  }

  delete<T = any>(path: string, token?: string, options: RequestOptions = {}) {
    return this.request<T>('DELETE', path, { ...options, token });
  }
}

/** A 429 of the rate limiter (EXTENSIONS.md §7), not a quota refusal. */
function rateLimited(bytes: Buffer): boolean {
  try {
    return JSON.parse(bytes.toString('utf8'))?.error?.code === 'RATE_LIMITED';
  } catch {
    return false;
  }
}

export const isJson = (headers: Headers): boolean => /^application\/json\b/i.test(headers.get('content-type') ?? '');

function parse<T>(method: string, path: string, response: Response, bytes: Buffer): Reply<T> {
  const text = bytes.toString('utf8');
  let body: unknown = text;
  if (isJson(response.headers) && text !== '') {
    try {
      body = JSON.parse(text);
    } catch {
      throw new Failure(
        `${method} ${path} → ${response.status}: Content-Type says JSON but the body does not parse: ${show(text, 200)}`,
      );
    }
  }
  return { method, path, status: response.status, headers: response.headers, text, bytes, body: body as T };
}

/** The wire-schema check every response goes through. */
function check(reply: Reply): void {
  const route = reply.path.split('?')[0];
  const schema = responseSchemaFor(reply.method, route, reply.status);
  if (reply.status >= 400) {
    if (!isJson(reply.headers)) {
      throw new Failure(
        `${reply.method} ${reply.path} → ${reply.status} is not a JSON error body (Content-Type ${reply.headers.get('content-type')}): ${show(reply.text, 200)}`,
      );
    }
  } else if (schema !== undefined && !isJson(reply.headers)) {
    throw new Failure(
      `${reply.method} ${reply.path} → ${reply.status}: expected JSON (${schema}), got Content-Type ${reply.headers.get('content-type')}`,
    );
  }
  if (schema === undefined || !isJson(reply.headers)) return;
  const violations = responseViolations(schema, reply.body);
  if (violations.length > 0) {
    throw new Failure(
      `${reply.method} ${reply.path} → ${reply.status} violates the ${schema} schema: ${violations.slice(0, 3).join('; ')} — body ${show(reply.text, 300)}`,
    );
  }
}
