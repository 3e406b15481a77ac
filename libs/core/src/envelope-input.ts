import { badRequest, isFileId, type ContentPart, type PostedEnvelope } from '#domain';
import { validateRequest } from '#schemas';

/**
 * Validate a `POST /messages` body in ASMTP.md §2.5 step 2 order (schema `post-message`), then the
 * cross-field `references[-1] == in_reply_to` rule. Unknown top-level fields are dropped;
 * `subject: null` and `monitor: null` count as absent.
 */
export function parsePostedEnvelope(input: Record<string, unknown>): PostedEnvelope {
  const body = validateRequest('post-message', input);
  const posted: PostedEnvelope = {
    id: body.id,
    to: body.to,
    date_ms: body.date_ms,
    content_parts: body.content_parts,
  };
  if (body.cc !== undefined) posted.cc = body.cc;
  if (body.subject !== undefined && body.subject !== null) posted.subject = body.subject;
  if (body.in_reply_to !== undefined) posted.in_reply_to = body.in_reply_to;
  if (body.references !== undefined) posted.references = body.references;
  if (body.monitor !== undefined && body.monitor !== null) posted.monitor = body.monitor;
  if (body.allow_warnings !== undefined) posted.allow_warnings = body.allow_warnings;
  const references = posted.references ?? [];
  if (references.length > 0 && posted.in_reply_to !== undefined && references.at(-1) !== posted.in_reply_to) {
    throw badRequest('INVALID_REFERENCES', 'the last reference must equal in_reply_to');
  }
  return posted;
}

/**
 * Replace each part's `file_id` by `url` = `{publicUrl}/files/{id}`, appended as the last key (§7.2).
 * A `file_id` that is not one Roost mints can never be claimed: 400 INVALID_FILE before it reaches SQL.
 */
export function resolveFileParts(parts: ContentPart[], publicUrl: string): { parts: ContentPart[]; fileIds: string[] } {
  const fileIds: string[] = [];
  const resolved = parts.map((part) => {
    if (typeof part.file_id !== 'string') return part;
    if (!isFileId(part.file_id)) throw badRequest('INVALID_FILE', 'file_id is unknown, not yours, or already used');
    fileIds.push(part.file_id);
    const { file_id: fileId, ...rest } = part;
    return { ...rest, url: `${publicUrl}/files/${encodeURIComponent(fileId)}` };
  });
  return { parts: resolved, fileIds };
}

const SEARCH_TEXT_MAX = 64 * 1024;

/** The words full-text search indexes: subject, text parts, data parts, file names. */
export function searchTextOf(posted: PostedEnvelope): string {
  const pieces: string[] = [];
  if (posted.subject) pieces.push(posted.subject);
  for (const part of posted.content_parts) {
    if (part.type === 'text') pieces.push(part.text as string);
    else if (part.type === 'data') pieces.push(JSON.stringify(part.data));
    else if (typeof part.name === 'string') pieces.push(part.name);
  }
  // Postgres text cannot hold NUL; the index does not need it.
  return pieces.join('\n').slice(0, SEARCH_TEXT_MAX).replaceAll('\u0000', ' ');
}
