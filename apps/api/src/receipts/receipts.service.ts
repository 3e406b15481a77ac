import { Injectable } from '@nestjs/common';
import { AcceptService } from '#core';
import { ReceiptsRepository, type ReceiptRow } from '#db';
import {
  badRequest,
  isEnvelopeId,
  notFound,
  receiptPart,
  ulid,
  ulidTime,
  type Agent,
  type ReceiptClaim,
} from '#domain';
import { validateRequest } from '#schemas';

/**
 * Receipts and delivery status (EXTENSIONS.md §2). A receipt is an ordinary envelope from a
 * recipient to the original sender, sent through the accept path, so it is durable, pushed,
 * replayed and retained like any envelope.
 */
@Injectable()
export class ReceiptsService {
  constructor(
    private readonly receipts: ReceiptsRepository,
    private readonly accept: AcceptService,
  ) {}

  async post(author: Agent, envelopeId: string, body: Record<string, unknown>) {
    requireEnvelopeId(envelopeId);
    const input = validateRequest('receipt-create', body);
    const parties = await this.receipts.parties(envelopeId, author.id);
    if (!parties?.is_recipient) throw notFound();
    const claim: ReceiptClaim = {
      envelope_id: envelopeId,
      status: input.status,
      ...(input.note !== undefined ? { note: input.note } : {}),
    };
    // A client id makes a retry idempotent: the same id gives the same date_ms, hence the same body.
    const id = input.id ?? ulid();
    const { accepted } = await this.accept.accept(author, {
      id,
      to: [parties.sender_handle],
      in_reply_to: envelopeId,
      date_ms: input.id !== undefined ? ulidTime(id) : Date.now(),
      content_parts: [receiptPart(claim)],
    });
    return {
      id,
      envelope_id: envelopeId,
      from: author.handle,
      status: claim.status,
      ...(claim.note !== undefined ? { note: claim.note } : {}),
      created_at: accepted.created_at,
    };
  }

  /** The sender sees every receipt; a recipient only its own; anyone else a 404. */
  async list(caller: Agent, envelopeId: string) {
    requireEnvelopeId(envelopeId);
    const parties = await this.receipts.parties(envelopeId, caller.id);
    if (!parties || (parties.sender_id !== caller.id && !parties.is_recipient)) throw notFound();
    const rows = await this.receipts.list(envelopeId, parties.sender_id === caller.id ? undefined : caller.id);
    return { receipts: rows.map(receiptView) };
  }

  /** Per recipient, in recipient order: read, latest receipt status, updated_at. A recipient sees only its own row. */
  async status(caller: Agent, envelopeId: string) {
    requireEnvelopeId(envelopeId);
    const parties = await this.receipts.parties(envelopeId, caller.id);
    if (!parties || (parties.sender_id !== caller.id && !parties.is_recipient)) throw notFound();
    const rows = await this.receipts.recipientStatus(
      envelopeId,
      parties.sender_id === caller.id ? undefined : caller.id,
    );
    return {
      envelope_id: envelopeId,
      recipients: rows.map((row) => ({
        handle: row.handle,
        read: row.read,
        status: row.status,
        updated_at: Math.max(row.entry_created_at, row.read_at ?? 0, row.receipt_at ?? 0),
      })),
    };
  }
}

function requireEnvelopeId(id: string): void {
  if (!isEnvelopeId(id)) throw badRequest('INVALID_ENVELOPE_ID', 'not an envelope id');
}

function receiptView(row: ReceiptRow) {
  const body = JSON.parse(row.body) as { content_parts: Array<{ data?: { note?: string } }> };
  const note = body.content_parts.find((part) => part.data && 'status' in part.data)?.data?.note;
  return {
    id: row.id,
    envelope_id: row.envelope_id,
    from: row.from,
    status: row.status,
    ...(note !== undefined ? { note } : {}),
    created_at: row.created_at,
  };
}
