import createClient from 'openapi-fetch';
import { ulid } from '#domain';
import type { components, paths } from './roost-api';

type Schemas = components['schemas'];

export interface RoundTrip {
  accepted: Schemas['accepted'];
  listed: Schemas['header'][];
  read: Schemas['stored-envelope'];
  receipt: Schemas['receipt'];
  receipts: Schemas['receipt'][];
  status: Schemas['delivery-status'];
}

/**
 * send → list → read → receipt with a client generated from /openapi.json by openapi-typescript
 * (roost-api.d.ts) and openapi-fetch: written against the generated types only, and type-checked
 * with the rest of the tree, so a document that stops describing a route or a field breaks it.
 */
export async function roundTrip(
  baseUrl: string,
  from: { handle: string; token: string },
  to: { handle: string; token: string },
): Promise<RoundTrip> {
  const sender = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${from.token}` } });
  const recipient = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${to.token}` } });

  // The content part's members beyond `type` are conditional (if/then) in the schema.
  const part = { type: 'text' as const, text: 'hello from a generated client' };
  const sent = await sender.POST('/messages', {
    body: { id: ulid(), to: [to.handle], date_ms: Date.now(), subject: 'typed', content_parts: [part] },
  });
  if (!sent.data) throw new Error(`send: ${sent.response.status} ${JSON.stringify(sent.error)}`);
  const id = sent.data.id;

  const listed = await recipient.GET('/mailbox', { params: { query: { unread: 'true', limit: 10 } } });
  if (!listed.data) throw new Error(`list: ${listed.response.status} ${JSON.stringify(listed.error)}`);

  const read = await recipient.GET('/messages/{id}', { params: { path: { id } } });
  if (!read.data) throw new Error(`read: ${read.response.status} ${JSON.stringify(read.error)}`);

  const receipt = await recipient.POST('/messages/{id}/receipts', {
    params: { path: { id } },
    body: { status: 'applied', note: 'done' },
  });
  if (!receipt.data) throw new Error(`receipt: ${receipt.response.status} ${JSON.stringify(receipt.error)}`);

  const receipts = await sender.GET('/messages/{id}/receipts', { params: { path: { id } } });
  if (!receipts.data) throw new Error(`receipts: ${receipts.response.status} ${JSON.stringify(receipts.error)}`);
  const status = await sender.GET('/messages/{id}/status', { params: { path: { id } } });
  if (!status.data) throw new Error(`status: ${status.response.status} ${JSON.stringify(status.error)}`);

  return {
    accepted: sent.data,
    listed: listed.data.envelope_headers,
    read: read.data,
    receipt: receipt.data,
    receipts: receipts.data.receipts,
    status: status.data,
  };
}

/** A typed error: the ASMTP error body, as the document describes 4XX answers. */
export async function unknownMessage(
  baseUrl: string,
  token: string,
): Promise<{ status: number; error: Schemas['error'] | undefined }> {
  const client = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${token}` } });
  const reply = await client.GET('/messages/{id}', { params: { path: { id: ulid() } } });
  return { status: reply.response.status, error: reply.error };
}
