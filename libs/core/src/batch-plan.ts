import type { EntryRow, EnvelopeRow, MailboxState } from '#db';
import { createdAtAbove, headerJsonOf, type HeaderExtensions, type StoredEnvelope, type TypeHint } from '#domain';

/** One recipient of an accept job. */
export interface AcceptRecipient {
  agentId: number;
  handle: string;
  kind: 'to' | 'cc';
  /**
   * The mailbox's `last_seq` and the `last_created_at` written with it, as the sender's lookup read
   * them (undefined when not looked up): a hint for the lock-free path, whose compare-and-set
   * refuses it whole if another writer moved the mailbox on since.
   */
  lastSeq?: number;
  lastCreatedAt?: number;
}

/** One envelope ready to commit: everything but `created_at`, `seq` and the header that holds them. */
export interface AcceptJob {
  envelopeId: string;
  senderId: number;
  /** Expanded recipients in order (ASMTP.md §2.5 step 3). */
  recipients: ReadonlyArray<AcceptRecipient>;
  stored: StoredEnvelope;
  /** `stored` serialised once: the byte-exact body GET returns and retries compare against. */
  body: string;
  derived: { type_hint: TypeHint; size_hint: number };
  extensions: HeaderExtensions;
  selfAddressed: boolean;
  searchText: string;
  fileIds: readonly string[];
  /** A receipt envelope: the envelope it answers and its status (EXTENSIONS.md §2). */
  receipt?: { envelope_id: string; status: string };
  /** Content guard codes the sender overrode in block mode (EXTENSIONS.md §4). */
  guardOverride?: string[];
  /**
   * The policy epoch (migration 0009) of the kept sender lookup that admitted this send: its commit
   * checks that the epoch has not moved on since (else the outcome is `policy_stale`). Absent when
   * the policy was read afresh for this send.
   */
  policyEpoch?: number;
}

export type AcceptOutcome =
  | {
      kind: 'stored';
      createdAt: number;
      receivedMs: number;
      header: string;
      entries: ReadonlyArray<{ mailboxId: number; seq: number }>;
    }
  /** The id was already stored (by this sender or another): the caller decides replay or 409. */
  | { kind: 'exists' }
  /** Nothing stored: the policy changed since the kept lookup of `policyEpoch`; read it afresh and retry. */
  | { kind: 'policy_stale' };

/** What a commit wrote: each job's outcome and the new state of each mailbox it advanced. */
export interface Committed {
  outcomes: AcceptOutcome[];
  states: MailboxState[];
}

/** Each job's `created_at`, header and envelope row, position by position. */
export interface Stamped {
  createdAts: number[];
  headers: string[];
  envelopes: EnvelopeRow[];
}

export interface BatchPlan extends Committed, Stamped {
  entries: EntryRow[];
}

/**
 * Stamp every job of a batch: `created_at` strictly above each recipient mailbox's last one and
 * above the jobs before it in the batch (DESIGN.md), and the header that carries it. The hot loop
 * of every batch (50 recipients an envelope): `nextCreatedAt`'s rule a step at a time
 * (`createdAtAbove`), no array per job.
 */
export function stampBatch(jobs: readonly AcceptJob[], locked: readonly MailboxState[], now: number): Stamped {
  const lastCreatedAt = new Map<number, number>();
  for (const state of locked) lastCreatedAt.set(state.agent_id, state.last_created_at);
  const stamped: Stamped = { createdAts: [], headers: [], envelopes: [] };
  for (const job of jobs) {
    const recipients = job.recipients;
    let createdAt = now;
    for (let i = 0; i < recipients.length; i++)
      createdAt = createdAtAbove(createdAt, lastCreatedAt.get(recipients[i].agentId)!);
    for (let i = 0; i < recipients.length; i++) lastCreatedAt.set(recipients[i].agentId, createdAt);
    // Fields spelled out: on Node 20 a spread followed by more properties (`{ ...a, b }`) costs about
    // half a microsecond per property, once per envelope here.
    const { type_hint, size_hint } = job.derived;
    const header = headerJsonOf(job.stored, { type_hint, size_hint, created_at: createdAt }, job.extensions);
    stamped.createdAts.push(createdAt);
    stamped.headers.push(header);
    stamped.envelopes.push(envelopeRow(job, createdAt, now, header));
  }
  return stamped;
}

/**
 * Allocate the next `seq` of each recipient mailbox to every stored job, in order; a job whose id
 * was already taken (`stored` false) gets `exists` and advances nothing. The mailboxes' states are
 * tracked by position in `locked` (one Map of ids to positions, no copy of each state); the states
 * advanced are built once at the end, in the order each was first advanced.
 */
export function allocateEntries(
  jobs: readonly AcceptJob[],
  stamped: Stamped,
  locked: readonly MailboxState[],
  now: number,
  stored?: (job: AcceptJob) => boolean,
): BatchPlan {
  const slots = new Map<number, number>();
  const seqs: number[] = [];
  const createdAts: number[] = [];
  for (let slot = 0; slot < locked.length; slot++) {
    const state = locked[slot];
    slots.set(state.agent_id, slot);
    seqs.push(state.last_seq);
    createdAts.push(state.last_created_at);
  }
  /** Positions in `locked` of the advanced mailboxes, in the order first advanced. */
  const changed: number[] = [];
  const seen = new Uint8Array(locked.length);
  const entries: EntryRow[] = [];
  const outcomes: AcceptOutcome[] = [];
  for (let i = 0; i < jobs.length; i++) {
    const job = jobs[i];
    if (stored !== undefined && !stored(job)) {
      outcomes.push({ kind: 'exists' });
      continue;
    }
    const createdAt = stamped.createdAts[i];
    const recipients = job.recipients;
    const allocated: Array<{ mailboxId: number; seq: number }> = [];
    for (let j = 0; j < recipients.length; j++) {
      const r = recipients[j];
      const slot = slots.get(r.agentId);
      if (slot === undefined) throw new Error(`mailbox ${r.agentId} is not among the batch's states`);
      const seq = seqs[slot] + 1;
      seqs[slot] = seq;
      createdAts[slot] = createdAt;
      if (seen[slot] === 0) {
        seen[slot] = 1;
        changed.push(slot);
      }
      entries.push({ mailbox_id: r.agentId, seq, envelope_id: job.envelopeId, created_at: createdAt, kind: r.kind });
      allocated.push({ mailboxId: r.agentId, seq });
    }
    outcomes.push({ kind: 'stored', createdAt, receivedMs: now, header: stamped.headers[i], entries: allocated });
  }
  const states: MailboxState[] = [];
  for (const slot of changed)
    states.push({ agent_id: locked[slot].agent_id, last_seq: seqs[slot], last_created_at: createdAts[slot] });
  return { ...stamped, entries, states, outcomes };
}

/** Stamp and allocate a batch as if every job is new (the one-statement paths). */
export function planBatch(jobs: readonly AcceptJob[], locked: readonly MailboxState[], now: number): BatchPlan {
  return allocateEntries(jobs, stampBatch(jobs, locked, now), locked, now);
}

function envelopeRow(job: AcceptJob, createdAt: number, now: number, header: string): EnvelopeRow {
  return {
    id: job.envelopeId,
    sender_id: job.senderId,
    created_at: createdAt,
    received_ms: now,
    body: job.body,
    header,
    recipients: handlesOf(job.recipients),
    self_addressed: job.selfAddressed,
    search_text: job.searchText,
    receipt_for: job.receipt?.envelope_id ?? null,
    receipt_status: job.receipt?.status ?? null,
    guard_override: job.guardOverride ?? null,
  };
}

function handlesOf(recipients: ReadonlyArray<AcceptRecipient>): string[] {
  const handles = new Array<string>(recipients.length);
  for (let i = 0; i < recipients.length; i++) handles[i] = recipients[i].handle;
  return handles;
}

/**
 * Each advanced mailbox's `last_seq` in `known`, in the order of `plan.states` (the compare of
 * compare-and-set). On the lock-free path every mailbox of `known` advances, in the same order
 * (both the order of first appearance in the jobs): read by position, by id only when not.
 */
export function expectedSeqs(plan: Committed, known: readonly MailboxState[]): number[] {
  const states = plan.states;
  const seqs = new Array<number>(states.length);
  let before: Map<number, number> | undefined;
  for (let i = 0; i < states.length; i++) {
    const id = states[i].agent_id;
    const same = known[i];
    if (same !== undefined && same.agent_id === id) {
      seqs[i] = same.last_seq;
      continue;
    }
    before ??= new Map(known.map((state) => [state.agent_id, state.last_seq]));
    seqs[i] = before.get(id)!;
  }
  return seqs;
}

/**
 * The newest mailbox state the jobs' lookups read, per mailbox (`last_seq` only grows, and the
 * `last_created_at` read with it is the one written with it).
 */
export function lookedUpStates(jobs: readonly AcceptJob[]): Map<number, MailboxState> {
  const seen = new Map<number, MailboxState>();
  for (const job of jobs) {
    const recipients = job.recipients;
    for (let i = 0; i < recipients.length; i++) {
      const r = recipients[i];
      if (r.lastSeq === undefined || r.lastCreatedAt === undefined) continue;
      const known = seen.get(r.agentId);
      if (known === undefined || known.last_seq < r.lastSeq)
        seen.set(r.agentId, { agent_id: r.agentId, last_seq: r.lastSeq, last_created_at: r.lastCreatedAt });
    }
  }
  return seen;
}

/** The distinct recipient mailboxes of some jobs, in order of first appearance. */
export function mailboxesOf(jobs: readonly AcceptJob[]): number[] {
  const seen = new Set<number>();
  const ids: number[] = [];
  for (const job of jobs) {
    const recipients = job.recipients;
    for (let i = 0; i < recipients.length; i++) {
      const id = recipients[i].agentId;
      if (seen.has(id)) continue;
      seen.add(id);
      ids.push(id);
    }
  }
  return ids;
}
