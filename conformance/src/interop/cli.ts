import { Failure, keyOrder, show } from '../assert';
import type { Http, Reply } from '../http';
import { uuid } from '../util';
import { LISTING_KEYS } from '../wire';

/** What the ASMTP CLI 0.3.7 sends on every request (ASMTP.md §8.3). */
export const USER_AGENT = `robotnet-cli/0.3.7 node/${process.versions.node} ${process.platform}-${process.arch}`;

/** One recorded request, as the CLI would have sent it. */
export interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
}

/**
 * The ASMTP CLI's HTTP behaviour, replayed: its exact headers (Authorization, User-Agent,
 * Content-Type with a JSON body, a fresh Idempotency-Key on POST/PATCH/DELETE), and its response
 * handling: any 2xx is success (204 = empty), anything else an error keyed on `error.code`.
 */
export class CliHttp {
  readonly sent: Sent[] = [];

  constructor(
    readonly http: Http,
    readonly token: string,
  ) {}

  headers(method: string, json: boolean): Record<string, string> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, 'user-agent': USER_AGENT };
    if (json) headers['content-type'] = 'application/json';
    if (method === 'POST' || method === 'PATCH' || method === 'DELETE') headers['idempotency-key'] = uuid();
    return headers;
  }

  /** A JSON call; returns the reply after checking it the CLI's way (2xx, JSON unless 204). */
  async call(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<Reply> {
    const headers = { ...this.headers(method, body !== undefined), ...extraHeaders };
    this.sent.push({ method, path, headers });
    const payload =
      body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    return this.http.request(method, path, { headers, body: payload });
  }

  /** The call must succeed as the CLI sees success; the parsed body (null for 204). */
  async ok(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<any> {
    const reply = await this.call(method, path, body, extraHeaders);
    if (reply.status < 200 || reply.status > 299) {
      throw new Failure(
        `the CLI would fail: ${method} ${path} → ${reply.status} ${cliErrorCode(reply)} ${show(reply.text, 200)}`,
      );
    }
    if (reply.status === 204) return null;
    if (typeof reply.body !== 'object' || reply.body === null)
      throw new Failure(`the CLI cannot parse ${method} ${path} → ${reply.status}: ${show(reply.text, 200)}`);
    return reply.body;
  }
}

/** How the CLI names an error: `error.code`, `{"error":"CODE"}`, FastAPI `detail`, else `http_<status>`. */
export function cliErrorCode(reply: Reply): string {
  const body = reply.body;
  if (body && typeof body === 'object') {
    if (body.error && typeof body.error === 'object' && typeof body.error.code === 'string') return body.error.code;
    if (typeof body.error === 'string') return body.error;
    if (body.detail !== undefined) return `detail:${JSON.stringify(body.detail)}`;
  }
  return `http_${reply.status}`;
}

/** The CLI accepts a header only with id/from strings, to an array, type_hint a string, created_at/date_ms numbers. */
export function cliAcceptsHeader(frame: any): string | null {
  if (frame === null || typeof frame !== 'object') return 'not an object';
  if (typeof frame.id !== 'string') return 'id is not a string';
  if (typeof frame.from !== 'string') return 'from is not a string';
  if (!Array.isArray(frame.to)) return 'to is not an array';
  if (typeof frame.type_hint !== 'string') return 'type_hint is not a string';
  if (typeof frame.created_at !== 'number') return 'created_at is not a number';
  if (typeof frame.date_ms !== 'number') return 'date_ms is not a number';
  return null;
}

/** Every header of a listing the CLI accepts, in the reference's listing key order (§3.5). */
export function checkHeaders(headers: any[], what: string): void {
  for (const header of headers) {
    const problem = cliAcceptsHeader(header);
    if (problem) throw new Failure(`${what}: the CLI drops header ${show(header, 200)}: ${problem}`);
    keyOrder(header, LISTING_KEYS, `${what} header ${header.id}`);
  }
}

/** `next_cursor` must be present, and explicitly null or a cursor object (the listen loop stops only on `=== null`). */
export function checkNextCursor(reply: Reply, what: string): void {
  if (!('next_cursor' in reply.body))
    throw new Failure(`${what}: next_cursor is missing — the CLI's listen catch-up loop would never end`);
  const cursor = reply.body.next_cursor;
  if (
    cursor !== null &&
    (typeof cursor !== 'object' || typeof cursor.created_at !== 'number' || typeof cursor.envelope_id !== 'string')
  ) {
    throw new Failure(`${what}: next_cursor ${show(cursor)} is neither null nor {created_at, envelope_id}`);
  }
}
