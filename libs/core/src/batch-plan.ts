import type { EntryRow, EnvelopeRow, MailboxState } from '#db';
import { headerJsonOf, nextCreatedAt, type HeaderExtensions, type StoredEnvelope, type TypeHint } from '#domain';

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
  | { kind: 'exists' };

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
 * above the jobs before it in the batch (DESIGN.md), and the header that carries it.
 */
export function stampBatch(jobs: readonly AcceptJob[], locked: readonly MailboxState[], now: number): Stamped {
  const lastCreatedAt = new Map(locked.map((state) => [state.agent_id, state.last_created_at]));
  const stamped: Stamped = { createdAts: [], headers: [], envelopes: [] };
  for (const job of jobs) {
    const createdAt = nextCreatedAt(
      now,
      job.recipients.map((r) => lastCreatedAt.get(r.agentId)!),
    );
    for (const r of job.recipients) lastCreatedAt.set(r.agentId, createdAt);
    const header = headerJsonOf(job.stored, { ...job.derived, created_at: createdAt }, job.extensions);
    stamped.createdAts.push(createdAt);
    stamped.headers.push(header);
    stamped.envelopes.push(envelopeRow(job, createdAt, now, header));
  }
  return stamped;
}

/**
 * Allocate the next `seq` of each recipient mailbox to every stored job, in order; a job whose id
 * was already taken (`stored` false) gets `exists` and advances nothing.
 */
export function allocateEntries(
  jobs: readonly AcceptJob[],
  stamped: Stamped,
  locked: readonly MailboxState[],
  now: number,
  stored: (job: AcceptJob) => boolean = () => true,
): BatchPlan {
  const states = new Map<number, MailboxState>(locked.map((state) => [state.agent_id, { ...state }]));
  const plan: BatchPlan = { ...stamped, entries: [], states: [], outcomes: [] };
  const changed = new Set<number>();
  jobs.forEach((job, i) => {
    if (!stored(job)) {
      plan.outcomes.push({ kind: 'exists' });
      return;
    }
    const createdAt = stamped.createdAts[i];
    const allocated = job.recipients.map((r) => {
      const state = states.get(r.agentId)!;
      state.last_seq += 1;
      state.last_created_at = createdAt;
      changed.add(r.agentId);
      plan.entries.push({
        mailbox_id: r.agentId,
        seq: state.last_seq,
        envelope_id: job.envelopeId,
        created_at: createdAt,
        kind: r.kind,
      });
      return { mailboxId: r.agentId, seq: state.last_seq };
    });
    plan.outcomes.push({ kind: 'stored', createdAt, receivedMs: now, header: stamped.headers[i], entries: allocated });
  });
  plan.states = [...changed].map((id) => states.get(id)!);
  return plan;
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
    recipients: job.recipients.map((r) => r.handle),
    self_addressed: job.selfAddressed,
    search_text: job.searchText,
    receipt_for: job.receipt?.envelope_id ?? null,
    receipt_status: job.receipt?.status ?? null,
    guard_override: job.guardOverride ?? null,
  };
}

/** Each advanced mailbox's `last_seq` in `known`, in the order of `plan.states` (the compare of compare-and-set). */
export function expectedSeqs(plan: Committed, known: readonly MailboxState[]): number[] {
  const before = new Map(known.map((state) => [state.agent_id, state.last_seq]));
  return plan.states.map((state) => before.get(state.agent_id)!);
}

/**
 * The newest mailbox state the jobs' lookups read, per mailbox (`last_seq` only grows, and the
 * `last_created_at` read with it is the one written with it).
 */
export function lookedUpStates(jobs: readonly AcceptJob[]): Map<number, MailboxState> {
  const seen = new Map<number, MailboxState>();
  for (const job of jobs) {
    for (const r of job.recipients) {
      if (r.lastSeq === undefined || r.lastCreatedAt === undefined) continue;
      const known = seen.get(r.agentId);
      if (known === undefined || known.last_seq < r.lastSeq)
        seen.set(r.agentId, { agent_id: r.agentId, last_seq: r.lastSeq, last_created_at: r.lastCreatedAt });
    }
  }
  return seen;
}

/** The distinct recipient mailboxes of some jobs. */
export function mailboxesOf(jobs: readonly AcceptJob[]): number[] {
  return [...new Set(jobs.flatMap((job) => job.recipients.map((r) => r.agentId)))];
}
