import { responseSchemaFor, responseViolations } from '#schemas';

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  text: string;
  body: T;
}

export interface RequestOptions {
  token?: string;
  /** A JSON value (serialised), or a string/Buffer sent as is. */
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * HTTP client for tests: every response is checked against the wire schema of its route (or the
 * error schema), so each test also proves the response shapes.
 */
export class TestClient {
  constructor(readonly baseUrl: string) {}

  async request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | Buffer | undefined;
    if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) body = options.body;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(this.baseUrl + path, { method, headers, body });
    const buffer = Buffer.from(await response.arrayBuffer());
    const text = buffer.toString('utf8');
    const contentType = response.headers.get('content-type') ?? '';
    const parsed = contentType.startsWith('application/json') && text !== '' ? JSON.parse(text) : text;
    const schema = responseSchemaFor(method, path.split('?')[0], response.status);
    if (schema !== undefined && contentType.startsWith('application/json')) {
      const violations = responseViolations(schema, parsed);
      if (violations.length > 0) {
        throw new Error(`${method} ${path} → ${response.status} violates ${schema}: ${violations.join('; ')}\n${text}`);
      }
    }
    return { status: response.status, headers: response.headers, text, body: parsed as T };
  }

  get<T = any>(path: string, token?: string) {
    return this.request<T>('GET', path, { token });
  }

  post<T = any>(path: string, body: unknown, token?: string) {
    return this.request<T>('POST', path, { token, body });
  }

  patch<T = any>(path: string, body: unknown, token?: string) {
    return this.request<T>('PATCH', path, { token, body });
  }

  delete<T = any>(path: string, token?: string) {
    return this.request<T>('DELETE', path, { token });
  }
}
