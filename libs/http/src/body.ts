import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AsmtpError, badRequest, isHandle } from '#domain';

/** JSON bodies above this are refused with 413 PAYLOAD_TOO_LARGE (EXTENSIONS.md §7). */
export const MAX_JSON_BYTES = 1024 * 1024;
/** Room for a 10 MiB upload plus multipart framing. */
export const MAX_RAW_BYTES = 11 * 1024 * 1024;
/** Past this a client is not draining a refused body in good faith: drop the connection. */
const HARD_CAP_BYTES = 64 * 1024 * 1024;
/**
 * Deepest JSON nesting a body may have. JSON.parse copes with any depth, but JSON.stringify (which
 * stores an envelope) recurses and overflows the stack a few thousand levels down: refuse at parse.
 */
export const MAX_JSON_DEPTH = 1000;

/** A media type as Fastify parses it (RFC 9110: token "/" token, then any parameters). */
const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(;[\s\S]*)?$/;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** What the content-type parser leaves on `request.body`: bytes, not yet interpreted. */
export class RawBody {
  /** undefined: not decoded yet; null: not UTF-8 JSON. */
  private decoded: { text: string; value: unknown } | null | undefined;

  constructor(
    readonly bytes: Buffer,
    readonly tooLarge: boolean,
  ) {}

  /** The bytes as UTF-8 text and its JSON value, or null: decoded once per request however often asked. */
  json(): { text: string; value: unknown } | null {
    if (this.decoded === undefined) {
      try {
        const text = utf8.decode(this.bytes);
        this.decoded = { text, value: JSON.parse(text) };
      } catch {
        this.decoded = null;
      }
    }
    return this.decoded;
  }
}

/**
 * Read every body as raw bytes, whatever its Content-Type (ASMTP.md §3.0 does not check it).
 * Interpretation waits until after authentication, so an unauthenticated request gets its 401
 * before any 400/413 about its body.
 */
export function registerRawBodyParser(fastify: FastifyInstance): void {
  // Fastify answers a Content-Type it cannot parse (`;`, `a;b`, empty) with its own 415, before
  // any route or authentication runs. ASMTP does not check the Content-Type: read such a body as
  // opaque bytes (an upload then gets its 400 INVALID_REQUEST for not being multipart).
  fastify.addHook('onRequest', (request, _reply, done) => {
    const type = request.raw.headers['content-type'];
    if (type !== undefined && !MEDIA_TYPE.test(type)) request.raw.headers['content-type'] = 'application/octet-stream';
    done();
  });
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (_request, payload, done) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (error: Error | null, body?: RawBody) => {
      if (settled) return;
      settled = true;
      done(error, body);
    };
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > HARD_CAP_BYTES) {
        finish(new AsmtpError(413, 'PAYLOAD_TOO_LARGE', 'request body is too large'));
        payload.destroy();
        return;
      }
      if (size <= MAX_RAW_BYTES) chunks.push(chunk);
    });
    payload.on('end', () => finish(null, new RawBody(Buffer.concat(chunks), size > MAX_RAW_BYTES)));
    payload.on('error', (error) => finish(error));
  });
}

/**
 * The request body as a JSON object: empty → `{}`; over 1 MiB → 413; invalid UTF-8, unparsable,
 * nested deeper than MAX_JSON_DEPTH, or not an object → 400 INVALID_JSON.
 */
export function jsonBody(request: FastifyRequest): Record<string, unknown> {
  const body = request.body;
  if (body === undefined || body === null) return {};
  if (!(body instanceof RawBody)) throw new Error('raw body parser is not installed');
  if (body.tooLarge || body.bytes.length > MAX_JSON_BYTES) {
    throw new AsmtpError(413, 'PAYLOAD_TOO_LARGE', `JSON body is larger than ${MAX_JSON_BYTES} bytes`);
  }
  if (body.bytes.length === 0) return {};
  const decoded = body.json();
  if (decoded === null) throw badRequest('INVALID_JSON', 'body is not valid JSON');
  const { text, value: parsed } = decoded;
  if (exceedsDepth(text, MAX_JSON_DEPTH)) {
    throw badRequest('INVALID_JSON', `body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw badRequest('INVALID_JSON', 'body must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}

/** True when valid JSON `text` opens more than `limit` arrays/objects inside one another. */
export function exceedsDepth(text: string, limit: number): boolean {
  // Valid JSON closes every array/object it opens: deeper than `limit` takes at least 2 × (limit + 1)
  // characters, so a shorter body (an ordinary envelope) needs no scan.
  if (text.length < 2 * (limit + 1)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // the escaped character cannot end the string
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

const PEEK_MAX_BYTES = 64 * 1024;
const PEEK_MAX_HANDLES = 100;

/**
 * The handles a `POST /messages` body names in `to` and `cc`, read before authentication so the
 * sender and its recipients load in one round trip. A hint only: an unparsable or odd body yields
 * none, and the body is validated in full afterwards.
 */
export function peekRecipientHandles(request: FastifyRequest): string[] {
  const body = request.body;
  // The body is decoded once: `jsonBody` reuses what this parses.
  if (!(body instanceof RawBody) || body.tooLarge || body.bytes.length === 0 || body.bytes.length > PEEK_MAX_BYTES)
    return [];
  const parsed = body.json()?.value;
  if (parsed === null || typeof parsed !== 'object') return [];
  const { to, cc } = parsed as { to?: unknown; cc?: unknown };
  const handles = new Set<string>();
  for (const list of [to, cc]) {
    if (!Array.isArray(list)) continue;
    for (const handle of list) if (isHandle(handle) && handle.length <= 256) handles.add(handle);
  }
  return [...handles].slice(0, PEEK_MAX_HANDLES);
}

/** The raw bytes of the body (uploads). */
export function rawBody(request: FastifyRequest): RawBody {
  const body = request.body;
  if (body instanceof RawBody) return body;
  return new RawBody(Buffer.alloc(0), false);
}

/** The raw query string of the request (`?` excluded), for ASMTP's exact query rules. */
export function rawQuery(request: FastifyRequest): string {
  const url = request.raw.url ?? '';
  const mark = url.indexOf('?');
  return mark === -1 ? '' : url.slice(mark + 1);
}
