import { badRequest } from './errors';
import { isEnvelopeId } from './ids';
import type { ContentPart } from './envelope';

/** Receipts (EXTENSIONS.md §2): decision and action states, separate from read state. */
export const RECEIPT_STATUSES = [
  'accepted',
  'rejected',
  'deferred',
  'needs_confirmation',
  'applied',
  'blocked',
] as const;
export type ReceiptStatus = (typeof RECEIPT_STATUSES)[number];
export const RECEIPT_SCHEMA = 'roost.receipt/v1';
export const RECEIPT_NOTE_MAX = 2000;

export interface ReceiptClaim {
  envelope_id: string;
  status: ReceiptStatus;
  note?: string;
}

const invalid = (message: string) => badRequest('INVALID_RECEIPT', message);

/**
 * The receipt an envelope carries, if any: its one `{"type":"data","schema":"roost.receipt/v1"}`
 * part, checked (status in the list, envelope id, note ≤ 2000 characters, no other keys). Whether
 * the author holds that envelope and answers its sender is for the accept path to check.
 */
export function receiptOf(parts: readonly ContentPart[]): ReceiptClaim | undefined {
  const receipts = parts.filter((part) => part.type === 'data' && part.schema === RECEIPT_SCHEMA);
  if (receipts.length === 0) return undefined;
  if (receipts.length > 1) throw invalid('an envelope carries at most one receipt');
  const data = receipts[0].data as Record<string, unknown>;
  for (const key of Object.keys(data)) {
    if (key !== 'envelope_id' && key !== 'status' && key !== 'note') throw invalid(`unknown receipt field ${key}`);
  }
  if (!isEnvelopeId(data.envelope_id)) throw invalid('receipt envelope_id is not an envelope id');
  if (!(RECEIPT_STATUSES as readonly unknown[]).includes(data.status)) {
    throw invalid(`receipt status must be one of ${RECEIPT_STATUSES.join(', ')}`);
  }
  if (data.note !== undefined && (typeof data.note !== 'string' || [...data.note].length > RECEIPT_NOTE_MAX)) {
    throw invalid(`receipt note must be a string of at most ${RECEIPT_NOTE_MAX} characters`);
  }
  return {
    envelope_id: data.envelope_id,
    status: data.status as ReceiptStatus,
    ...(data.note !== undefined ? { note: data.note } : {}),
  };
}

/** The receipt part `POST /messages/{id}/receipts` sends. */
export function receiptPart(claim: ReceiptClaim): ContentPart {
  return { type: 'data', schema: RECEIPT_SCHEMA, data: { ...claim } };
}

/** The time part of a ULID (ms), so a retried receipt with a client id gets the same `date_ms`. */
export function ulidTime(id: string): number {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let time = 0;
  for (const char of id.slice(0, 10)) time = time * 32 + alphabet.indexOf(char);
  return time;
}
