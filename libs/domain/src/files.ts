import { type AsmtpError, badRequest } from './errors';

/** Upload rules of ASMTP.md §7.1. */
export const MAX_FILE_BYTES = 10 * 1024 * 1024;
export const FILE_TTL_MS = 24 * 60 * 60 * 1000;

export const ALLOWED_FILE_TYPES: ReadonlySet<string> = new Set([
  'application/json',
  'application/pdf',
  'image/gif',
  'image/jpeg',
  'image/png',
  'text/csv',
  'text/markdown',
  'text/plain',
  'application/octet-stream',
]);

const MAGIC: Record<string, Buffer[]> = {
  'application/pdf': [Buffer.from('%PDF-', 'latin1')],
  'image/gif': [Buffer.from('GIF87a', 'latin1'), Buffer.from('GIF89a', 'latin1')],
  'image/jpeg': [Buffer.from([0xff, 0xd8, 0xff])],
  'image/png': [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])],
};

/** Content checks in order: declared type, size ≥ 1, size ≤ 10 MiB, magic bytes. Returns the normalised type. */
export function checkUpload(declaredType: string, bytes: Buffer): string {
  const type = declaredType.split(';')[0].trim().toLowerCase();
  if (!ALLOWED_FILE_TYPES.has(type)) throw badRequest('INVALID_FILE', `content type ${type} is not allowed`);
  if (bytes.length < 1) throw badRequest('INVALID_FILE', 'file is empty');
  if (bytes.length > MAX_FILE_BYTES) throw badRequest('INVALID_FILE', 'file is larger than 10 MiB');
  const magic = MAGIC[type];
  if (magic && !magic.some((prefix) => bytes.subarray(0, prefix.length).equals(prefix))) {
    throw badRequest('INVALID_FILE', `file bytes do not match ${type}`);
  }
  return type;
}

/** Basename, trimmed, outer dots removed, runs outside `[A-Za-z0-9._ -]` → `_`, ≤ 180 chars, else `file`. */
export function sanitizeFilename(raw: string): string {
  const base = raw.split(/[\\/]/).pop() ?? '';
  const cleaned = base
    .trim()
    .replace(/^\.+|\.+$/g, '')
    .replace(/[^A-Za-z0-9._ -]+/g, '_')
    .slice(0, 180);
  return cleaned.length > 0 ? cleaned : 'file';
}

export interface UploadedPart {
  filename: string;
  contentType: string;
  bytes: Buffer;
}

const invalidRequest = (message: string): AsmtpError => badRequest('INVALID_REQUEST', message);

/** The boundary of a `multipart/form-data` Content-Type (prefix match case-insensitive, may be quoted). */
export function multipartBoundary(contentType: string | undefined): string {
  if (contentType === undefined || !contentType.toLowerCase().startsWith('multipart/form-data')) {
    throw invalidRequest('expected multipart/form-data');
  }
  // A quote never belongs to a boundary (RFC 2046): `boundary=""` is a missing boundary, not `""`.
  const match = /;\s*boundary=(?:"([^"]+)"|([^;\s"]+))/i.exec(contentType);
  const boundary = match?.[1] ?? match?.[2];
  if (!boundary) throw invalidRequest('multipart boundary is missing');
  return boundary;
}

/** Parse the first part of a multipart body; it must be the field `file` with a filename and a type. */
export function parseFirstFilePart(body: Buffer, boundary: string): UploadedPart {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const start = body.indexOf(delimiter);
  if (start === -1) throw invalidRequest('opening boundary not found');
  let headersStart = start + delimiter.length;
  if (body[headersStart] === 0x0d && body[headersStart + 1] === 0x0a) headersStart += 2;
  else throw invalidRequest('malformed multipart boundary line');
  const headersEnd = body.indexOf('\r\n\r\n', headersStart, 'latin1');
  if (headersEnd === -1) throw invalidRequest('malformed part headers');
  const contentStart = headersEnd + 4;
  const contentEnd = body.indexOf(Buffer.concat([Buffer.from('\r\n', 'latin1'), delimiter]), contentStart);
  if (contentEnd === -1) throw invalidRequest('closing boundary not found');

  const headers = new Map<string, string>();
  for (const line of body.subarray(headersStart, headersEnd).toString('utf8').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw invalidRequest('malformed part headers');
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  const disposition = headers.get('content-disposition') ?? '';
  const name = dispositionParam(disposition, 'name');
  if (!/^form-data\b/i.test(disposition) || name !== 'file')
    throw invalidRequest('first part must be the field "file"');
  const filename = dispositionParam(disposition, 'filename');
  if (filename === undefined) throw invalidRequest('file part has no filename');
  const contentType = headers.get('content-type');
  if (!contentType) throw invalidRequest('file part has no Content-Type');
  return { filename, contentType, bytes: body.subarray(contentStart, contentEnd) };
}

function dispositionParam(disposition: string, param: string): string | undefined {
  const match = new RegExp(`;\\s*${param}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, 'i').exec(disposition);
  if (!match) return undefined;
  return match[1] !== undefined ? match[1].replace(/\\(.)/g, '$1') : match[2];
}
