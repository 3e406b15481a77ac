/**
 * Wire objects of ASMTP (ASMTP.md) and the Roost extensions (EXTENSIONS.md), as the operator
 * sends them. The JSON Schemas in `libs/schemas/wire` are the source of truth; these types follow
 * them field for field.
 */

export type Handle = string;
export type EnvelopeId = string;
export type TypeHint = 'text' | 'image' | 'file' | 'data' | 'mixed';
export type ReceiptStatus = 'accepted' | 'rejected' | 'deferred' | 'needs_confirmation' | 'applied' | 'blocked';
export const RECEIPT_STATUSES: readonly ReceiptStatus[] = [
  'accepted',
  'rejected',
  'deferred',
  'needs_confirmation',
  'applied',
  'blocked',
];
export type ContentFlag = 'secret' | 'destructive' | 'production' | 'credential_request' | 'large';
export type Policy = 'allowlist' | 'open';
export type Visibility = 'public' | 'private';
export type GuardPolicy = 'off' | 'warn' | 'block';

export type ContentPart =
  | { type: 'text'; text: string; [key: string]: unknown }
  | { type: 'image'; url?: string; file_id?: string; mime_type?: string; [key: string]: unknown }
  | {
      type: 'file';
      url?: string;
      file_id?: string;
      name?: string;
      mime_type?: string;
      size?: number;
      [key: string]: unknown;
    }
  | { type: 'data'; data: Record<string, unknown>; schema?: string; [key: string]: unknown };

/** `POST /messages` body (ASMTP.md §2.1); `from` is never sent. */
export interface PostMessage {
  id: EnvelopeId;
  to: Handle[];
  date_ms: number;
  content_parts: ContentPart[];
  cc?: Handle[];
  subject?: string;
  in_reply_to?: EnvelopeId;
  references?: EnvelopeId[];
  monitor?: string;
  /** Content guard override (EXTENSIONS.md §4). */
  allow_warnings?: ContentFlag[];
}

export interface GuardWarning {
  code: string; // a ContentFlag, or a code a newer operator added
  part: unknown;
  detail: string;
}

/** `202` of `POST /messages`. */
export interface Accepted {
  id: EnvelopeId;
  received_ms: number;
  created_at: number;
  recipients: Array<{ handle: Handle }>;
  warnings?: GuardWarning[];
}

/** Stored envelope body (`GET /messages/{id}`). */
export interface StoredEnvelope {
  id: EnvelopeId;
  from: Handle;
  to: Handle[];
  date_ms: number;
  content_parts: ContentPart[];
  cc?: Handle[];
  subject?: string;
  in_reply_to?: EnvelopeId;
  references?: EnvelopeId[];
  monitor?: string;
}

/** `envelope.notify`: push frame and mailbox listing row (ASMTP.md §6.3, §3.5). */
export interface Header {
  op: 'envelope.notify';
  id: EnvelopeId;
  from: Handle;
  to: Handle[];
  cc?: Handle[];
  subject?: string;
  in_reply_to?: EnvelopeId;
  type_hint: TypeHint;
  size_hint: number;
  created_at: number;
  date_ms: number;
  flags?: ContentFlag[];
  receipt?: { envelope_id: EnvelopeId; status: ReceiptStatus };
  schedule_id?: string;
  direction?: 'in' | 'out' | 'self';
  unread?: boolean;
}

export interface Cursor {
  created_at: number;
  envelope_id: EnvelopeId;
}

export interface MailboxPage {
  envelope_headers: Header[];
  next_cursor: Cursor | null;
}

export interface MailboxQuery {
  direction?: 'in' | 'out' | 'both';
  order?: 'asc' | 'desc';
  limit?: number;
  unread?: boolean;
  after?: Cursor | null;
}

export interface MonitorFact {
  op: 'monitor.fact';
  monitor: string;
  envelope_id: EnvelopeId;
  recipient_handle: Handle;
  fact: 'stored' | 'bounced' | 'expired';
  at_ms: number;
}

export interface ReplayComplete {
  op: 'replay.complete';
  cursor: Cursor | null;
  replayed: number;
}

export interface CursorExpired {
  op: 'cursor.expired';
  oldest: Cursor | null;
}

/** Every frame `/connect` sends. */
export type Frame = Header | MonitorFact | ReplayComplete | CursorExpired;

export interface Receipt {
  id: EnvelopeId;
  envelope_id: EnvelopeId;
  from: Handle;
  status: ReceiptStatus;
  note?: string;
  created_at: number;
}

export interface ReceiptInput {
  status: ReceiptStatus;
  note?: string;
  /** Makes a retried receipt idempotent. */
  id?: EnvelopeId;
}

export interface DeliveryStatus {
  envelope_id: EnvelopeId;
  recipients: Array<{ handle: Handle; read: boolean; status: ReceiptStatus | null; updated_at: number }>;
}

export type ScheduleStatus = 'active' | 'paused' | 'completed' | 'cancelled' | 'failed';

/** A schedule's envelope: a `POST /messages` body without `id` (each firing mints one) and `date_ms`. */
export type ScheduleEnvelope = Omit<PostMessage, 'id' | 'date_ms'> & { date_ms?: number };

export interface Schedule {
  id: string;
  status: ScheduleStatus;
  envelope: ScheduleEnvelope;
  interval_ms: number | null;
  next_run_at: number | null;
  last_sent_at: number | null;
  last_envelope_id: EnvelopeId | null;
  send_count: number;
  max_count: number | null;
  end_at: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

export interface ScheduleInput {
  envelope: ScheduleEnvelope;
  interval_ms?: number;
  start_at?: number;
  max_count?: number;
  end_at?: number;
}

export interface AgentSelf {
  canonical_handle: Handle;
  display_name: string;
  description: string | null;
  card_body: string | null;
  visibility: Visibility;
  inbound_policy: Policy;
  created_at: number;
  updated_at: number;
  [key: string]: unknown;
}

export interface AgentSelfPatch {
  display_name?: string;
  description?: string | null;
  card_body?: string | null;
}

export interface Block {
  blocked_agent_id: string;
  blocked_handle: Handle;
  created_at: number;
}

export interface AgentHit {
  type: 'agent';
  id: string;
  canonical_handle: Handle;
  display_name: string;
  image_url: string | null;
}

export interface MessageHit {
  envelope_id: EnvelopeId;
  sender_handle: Handle;
  recipient_handles: Handle[];
  subject: string | null;
  snippet: null;
  created_at: number;
  date_ms: number;
}

export interface UploadedFile {
  id: string;
  status: 'ready';
  filename: string;
  content_type: string;
  size_bytes: number;
  created_at: number;
  expires_at: number;
}

export interface Health {
  ok: true;
  network: string;
  version: string;
  uptime_ms: number;
}

/** AdminAgent (ASMTP.md §1.4); `token` only on create and rotate. */
export interface AdminAgent {
  handle: Handle;
  token?: string;
  policy: Policy;
  allowlist: string[];
  display_name: string;
  description: string | null;
  card_body: string | null;
  visibility: Visibility;
  content_guard?: GuardPolicy;
  retention_days?: number;
}

export interface AdminAgentInput {
  policy?: Policy | null;
  display_name?: string;
  description?: string | null;
  card_body?: string | null;
  visibility?: Visibility;
  content_guard?: GuardPolicy | null;
  retention_days?: number | null;
}

/** Organization (EXTENSIONS.md §5); `admin_token` only on create and rotate. */
export interface Org {
  name: string;
  admin_token?: string;
  retention_days: number | null;
  content_guard: GuardPolicy;
  max_agents: number | null;
  agent_count?: number;
  created_at: number;
  updated_at: number;
}

export interface OrgInput {
  retention_days?: number | null;
  content_guard?: GuardPolicy;
  max_agents?: number | null;
}
