import { existsSync, readFileSync } from 'node:fs';
import { basename, extname } from 'node:path';
import {
  RECEIPT_STATUSES,
  renderEnvelope,
  RoostError,
  shortId,
  triageBlock,
  type ContentPart,
  type Draft,
  type ReceiptStatus,
  type StoredEnvelope,
} from '#client';
import { requireHandles } from '../args';
import { resolveId } from '../ids';
import { CliError, EXIT } from '../output';
import type { Session } from '../session';

export const MIME: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.pdf': 'application/pdf',
  '.json': 'application/json',
  '.csv': 'text/csv',
  '.md': 'text/markdown',
  '.txt': 'text/plain',
};

const FILE_ID_RE = /^file_[0-9A-Za-z_-]+$/;

export interface ComposeOptions {
  text?: string[];
  stdin?: boolean;
  data?: string[];
  file?: string[];
  image?: string[];
  subject?: string;
  cc?: string[];
  monitor?: string;
  allowWarnings?: string;
  id?: string;
}

function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch {
    return '';
  }
}

/** Content parts in ASMTP CLI order: texts, files, images, data. */
async function parts(session: Session, options: ComposeOptions): Promise<ContentPart[]> {
  const out: ContentPart[] = [];
  for (const text of options.text ?? []) out.push({ type: 'text', text });
  if (options.stdin) {
    const text = readStdin();
    if (text.trim() !== '') out.push({ type: 'text', text });
  }
  const uploads: Array<['file' | 'image', string]> = [
    ...(options.file ?? []).map((path) => ['file', path] as ['file', string]),
    ...(options.image ?? []).map((path) => ['image', path] as ['image', string]),
  ];
  for (const [kind, path] of uploads) {
    // A file uploaded before (`roost files upload`) is attached by its id, once (ASMTP.md §7.2).
    if (FILE_ID_RE.test(path) && !existsSync(path)) {
      out.push({ type: kind, file_id: path });
      continue;
    }
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (error) {
      throw new CliError(`cannot read ${path}: ${(error as Error).message}`, EXIT.USAGE, undefined, 'BAD_FILE');
    }
    const mime = MIME[extname(path).toLowerCase()] ?? 'application/octet-stream';
    const uploaded = await session.client().uploadFile(bytes, basename(path), mime);
    out.push(
      kind === 'file'
        ? {
            type: 'file',
            file_id: uploaded.id,
            name: uploaded.filename,
            mime_type: uploaded.content_type,
            size: uploaded.size_bytes,
          }
        : { type: 'image', file_id: uploaded.id, mime_type: uploaded.content_type },
    );
  }
  for (const data of options.data ?? []) {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      throw new CliError(
        `--data is not JSON: ${data}`,
        EXIT.USAGE,
        'pass a JSON object, e.g. --data \'{"k":1}\'',
        'BAD_DATA',
      );
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new CliError('--data must be a JSON object', EXIT.USAGE, undefined, 'BAD_DATA');
    }
    out.push({ type: 'data', data: value as Record<string, unknown> });
  }
  if (out.length === 0)
    throw new CliError('nothing to send', EXIT.USAGE, 'give --text "…", --stdin, --data, --file or --image', 'EMPTY');
  return out;
}

function draftFields(options: ComposeOptions): Partial<Draft> {
  const fields: Partial<Draft> = {};
  if (options.subject !== undefined) fields.subject = options.subject;
  if (options.cc?.length) fields.cc = options.cc;
  if (options.monitor) fields.monitor = options.monitor;
  if (options.allowWarnings) fields.allow_warnings = options.allowWarnings.split(',') as Draft['allow_warnings'];
  if (options.id) fields.id = options.id;
  return fields;
}

function acceptedText(accepted: { id: string; recipients: Array<{ handle: string }>; warnings?: unknown[] }): string {
  const warn = accepted.warnings?.length ? `\nwarning: content guard flagged ${JSON.stringify(accepted.warnings)}` : '';
  return `sent ${accepted.id} (${shortId(accepted.id)}) to ${accepted.recipients.map((r) => r.handle).join(', ')}${warn}`;
}

/**
 * A 404 on send means a recipient is unknown or does not admit the sender (ASMTP non-enumeration):
 * name the recipients, since the operator's message cannot.
 */
export function namingRecipients(error: unknown, recipients: readonly string[]): unknown {
  if (!(error instanceof RoostError) || error.status !== 404) return error;
  const who = recipients.length === 1 ? recipients[0] : `one of ${recipients.join(', ')}`;
  return new CliError(
    `recipient not found: ${who} (unknown, or does not accept mail from you)`,
    EXIT.NOT_FOUND,
    'check the spelling; an unknown handle and one whose policy does not admit you look the same (ASMTP non-enumeration): ask its owner to allowlist you',
    error.code,
  );
}

export async function send(session: Session, to: string[], options: ComposeOptions): Promise<void> {
  requireHandles(to, 'recipient');
  requireHandles(options.cc, '--cc');
  const client = session.client();
  const draft = { to, content_parts: await parts(session, options), ...draftFields(options) };
  const accepted = await client.send(draft).catch((error: unknown) => {
    throw namingRecipients(error, [...new Set([...to, ...(options.cc ?? [])])]);
  });
  session.print.out(() => acceptedText(accepted), accepted);
}

export async function reply(session: Session, id: string, options: ComposeOptions & { all?: boolean }): Promise<void> {
  requireHandles(options.cc, '--cc');
  const client = session.client();
  const original = await client.message(await resolveId(client, id));
  const me = session.requireAgent();
  const to = original.from === me ? original.to : [original.from];
  const cc = options.all
    ? [...new Set([...original.to, ...(original.cc ?? [])])].filter((h) => h !== me && !to.includes(h))
    : [];
  const subject =
    options.subject ??
    (original.subject === undefined
      ? undefined
      : /^re:/i.test(original.subject)
        ? original.subject
        : `Re: ${original.subject}`);
  const accepted = await client.send({
    ...draftFields(options),
    to,
    ...(cc.length ? { cc } : {}),
    ...(subject !== undefined ? { subject } : {}),
    in_reply_to: original.id,
    references: [...(original.references ?? []), original.id],
    content_parts: await parts(session, options),
  });
  session.print.out(() => acceptedText(accepted), accepted);
}

export async function inbox(session: Session, options: { all?: boolean; limit?: string }): Promise<void> {
  const client = session.client();
  const limit = options.limit ? Number(options.limit) : 200;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new CliError('--limit must be 1–1000', EXIT.USAGE, undefined, 'BAD_LIMIT');
  const page = await client.mailbox({ unread: options.all ? undefined : true, order: 'asc', limit });
  const headers = page.envelope_headers;
  session.print.out(
    () =>
      options.all && headers.length
        ? triageBlock(headers).replace(' unread ', ' ')
        : triageBlock(headers, Date.now(), page.next_cursor !== null),
    {
      headers,
      more: page.next_cursor !== null,
    },
  );
}

export async function show(session: Session, ids: string[]): Promise<void> {
  const client = session.client();
  const full = [];
  for (const id of ids) full.push(await resolveId(client, id));
  const envelopes: StoredEnvelope[] = await client.messages(full);
  const missing = full.filter((id) => !envelopes.some((e) => e.id === id));
  session.print.out(
    () => envelopes.map(renderEnvelope).join('\n---\n'),
    envelopes.length === 1 && ids.length === 1 ? envelopes[0] : { envelopes, missing },
  );
  if (missing.length) {
    throw new CliError(`not found or not yours: ${missing.join(', ')}`, EXIT.NOT_FOUND, 'check the id', 'NOT_FOUND');
  }
}

export async function read(session: Session, ids: string[]): Promise<void> {
  const client = session.client();
  const full = [];
  for (const id of ids) full.push(await resolveId(client, id));
  const marked = await client.markRead(full);
  session.print.out(() => `marked ${marked.length} read`, { read: marked });
}

export async function receipt(
  session: Session,
  id: string,
  status: string,
  options: { note?: string; id?: string },
): Promise<void> {
  if (!RECEIPT_STATUSES.includes(status as ReceiptStatus)) {
    throw new CliError(
      `unknown receipt status ${status}`,
      EXIT.USAGE,
      `one of ${RECEIPT_STATUSES.join(', ')}`,
      'BAD_STATUS',
    );
  }
  const client = session.client();
  const envelopeId = await resolveId(client, id);
  const posted = await client.postReceipt(envelopeId, {
    status: status as ReceiptStatus,
    ...(options.note ? { note: options.note } : {}),
    ...(options.id ? { id: options.id } : {}),
  });
  session.print.out(() => `receipt ${posted.status} for ${envelopeId} (${posted.id})`, posted);
}

export async function status(session: Session, id: string): Promise<void> {
  const client = session.client();
  const envelopeId = await resolveId(client, id);
  const [delivery, receipts] = await Promise.all([client.status(envelopeId), client.receipts(envelopeId)]);
  session.print.out(
    () =>
      [
        `${envelopeId}:`,
        ...delivery.recipients.map(
          (r) =>
            `  ${r.handle} ${r.read ? 'read' : 'unread'} ${r.status ?? '-'} ${new Date(r.updated_at).toISOString()}`,
        ),
        ...(receipts.length
          ? [
              'receipts:',
              ...receipts.map(
                (r) => `  ${new Date(r.created_at).toISOString()} ${r.from} ${r.status}${r.note ? ` — ${r.note}` : ''}`,
              ),
            ]
          : []),
      ].join('\n'),
    { ...delivery, receipts },
  );
}
