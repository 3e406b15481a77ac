import { Injectable } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { Metrics } from '#metrics';
import { EnvelopesRepository, type EntryRow, type EnvelopeRow, type MailboxState } from '#db';
import { PumpScheduler } from './pump-scheduler';
import {
  badRequest,
  headerJsonOf,
  isUnavailable,
  nextCreatedAt,
  notFound,
  unavailable,
  type HeaderExtensions,
  type StoredEnvelope,
  type TypeHint,
} from '#domain';

/** One envelope ready to commit: everything but `created_at`, `seq` and the header that holds them. */
export interface AcceptJob {
  envelopeId: string;
  senderId: number;
  /** Expanded recipients in order (ASMTP.md §2.5 step 3). */
  recipients: ReadonlyArray<{ agentId: number; handle: string; kind: 'to' | 'cc' }>;
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

interface Pending {
  job: AcceptJob;
  /** When it was submitted (`now()`), for the queue deadline. */
  queuedAt: number;
  resolve: (outcome: AcceptOutcome) => void;
  reject: (error: unknown) => void;
}

/** A recipient's mailbox vanished between the policy check and the commit (agent deleted). */
class MailboxGone extends Error {}
/** A `file_id` could not be claimed (unknown, foreign, already bound, or twice in one envelope). */
class FileClaimRefused extends Error {}
/** An envelope id of the batch already exists: redo the batch statement by statement. */
class IdTaken extends Error {}

/** What a commit wrote: each job's outcome and the new state of each mailbox it advanced. */
interface Committed {
  outcomes: AcceptOutcome[];
  states: MailboxState[];
}

interface BatchPlan extends Committed {
  envelopes: EnvelopeRow[];
  entries: EntryRow[];
}

/**
 * Stamp every job of a batch as if all are new: `created_at` strictly above each recipient
 * mailbox's last one (DESIGN.md), the next `seq` of each mailbox, the header that carries both.
 */
function planBatch(jobs: readonly AcceptJob[], locked: readonly MailboxState[], now: number): BatchPlan {
  const states = new Map<number, MailboxState>(locked.map((state) => [state.agent_id, { ...state }]));
  const plan: BatchPlan = { envelopes: [], entries: [], states: [], outcomes: [] };
  const changed = new Set<number>();
  for (const job of jobs) {
    const createdAt = nextCreatedAt(now, job.recipients.map((r) => states.get(r.agentId)!.last_created_at));
    const header = headerJsonOf(job.stored, { ...job.derived, created_at: createdAt }, job.extensions);
    plan.envelopes.push(envelopeRow(job, createdAt, now, header));
    const allocated = job.recipients.map((r) => {
      const state = states.get(r.agentId)!;
      state.last_seq += 1;
      state.last_created_at = createdAt;
      changed.add(r.agentId);
      plan.entries.push({ mailbox_id: r.agentId, seq: state.last_seq, envelope_id: job.envelopeId, created_at: createdAt, kind: r.kind });
      return { mailboxId: r.agentId, seq: state.last_seq };
    });
    plan.outcomes.push({ kind: 'stored', createdAt, receivedMs: now, header, entries: allocated });
  }
  plan.states = [...changed].map((id) => states.get(id)!);
  return plan;
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

const MAX_ENTRIES_PER_BATCH = 20_000;
const RETRYABLE_SQLSTATE = new Set(['40P01', '40001']);
/** Mailbox states (and contended marks) remembered for the lock-free path, a few dozen bytes each. */
const REMEMBERED_MAX = 100_000;
/** A mailbox another writer moved on is written under the lock for this long before trying again. */
const CONTENDED_MS = 5_000;

/**
 * Coalesces concurrent accepts into shared transactions. Each transaction locks the recipients'
 * mailbox rows in id order, stamps `created_at` strictly above each mailbox's last one, inserts the
 * envelopes (an existing id is skipped, never overwritten), allocates per-mailbox `seq`, and
 * commits; only then does each caller get its outcome, so `202` still means durable. A batch
 * that fails because of one envelope is re-run one envelope per transaction.
 *
 * The common case skips the explicit transaction and the lock: a node remembers the state its own
 * commits left each mailbox in and writes against it in one statement, which fails whole when
 * another writer (another api node, a worker) moved the mailbox on since; the batch then takes
 * the locking path, and that mailbox stays on it for a while.
 */
@Injectable()
export class AcceptBatcher {
  private queue: Pending[] = [];
  private running = 0;
  /** Embedded PGlite: a batch starts on the next event-loop turn, so that turn's accepts join it. */
  private readonly scheduler: PumpScheduler;
  /** Mailboxes locked by batches in flight: a job touching one waits and joins a later batch. */
  private readonly busy = new Map<number, number>();
  private readonly writers: number;
  private readonly batchMax: number;
  /**
   * How long a job may wait in the queue before its own batch starts (ROOST_DB_STATEMENT_TIMEOUT_MS).
   * A job waits here while a batch in flight holds one of its mailboxes; that batch may itself wait
   * a whole statement timeout on a row lock (a long transaction elsewhere), and the next batch,
   * holding the job's other mailboxes, may too: without a deadline the waits chain (17.4 s seen
   * with a 5 s timeout). A job older than this answers 503 instead of starting a statement that
   * could wait one more timeout, so an accept answers within about twice the statement timeout.
   */
  private readonly queueDeadlineMs: number;
  /** Each mailbox's state as this node's last commit to it left it (insertion order = age). */
  private readonly remembered = new Map<number, MailboxState>();
  /** Mailboxes another writer moved on recently → when to try the lock-free path again. */
  private readonly contended = new Map<number, number>();
  /** Overridable for tests that need an injected clock. */
  now: () => number = Date.now;

  constructor(
    private readonly envelopes: EnvelopesRepository,
    private readonly metrics: Metrics,
    @InjectConfig() config: Config,
  ) {
    // PGlite has one session: more writers would only queue behind its lock.
    this.writers = config.databaseUrl === null ? 1 : config.accept.writers;
    // PGlite runs a statement synchronously on the event loop: a batch started at once for the
    // first accept of a turn would commit it alone while the turn's other accepts wait for the next.
    this.scheduler = new PumpScheduler(config.databaseUrl === null, () => this.pump());
    this.batchMax = config.accept.batchMax;
    this.queueDeadlineMs = config.db.statementTimeoutMs;
  }

  submit(job: AcceptJob): Promise<AcceptOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job, queuedAt: this.now(), resolve, reject });
      this.scheduler.request();
    });
  }

  private pump(): void {
    while (this.running < this.writers && this.queue.length > 0) {
      const batch = this.take();
      if (batch.length === 0) return; // everything queued waits on a mailbox a batch holds
      const mailboxes = mailboxesOf(batch.map((pending) => pending.job));
      for (const id of mailboxes) this.busy.set(id, (this.busy.get(id) ?? 0) + 1);
      this.running++;
      void this.commit(batch).finally(() => {
        for (const id of mailboxes) {
          const left = (this.busy.get(id) ?? 1) - 1;
          if (left > 0) this.busy.set(id, left);
          else this.busy.delete(id);
        }
        this.running--;
        this.pump();
      });
    }
  }

  /**
   * Up to `batchMax` queued jobs, in arrival order, with distinct ids and no mailbox that a batch
   * in flight holds: such a job would only wait for that lock, so it waits here instead and joins
   * the next batch (a hot mailbox then gets few large transactions rather than many small ones).
   */
  private take(): Pending[] {
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const ids = new Set<string>();
    let entries = 0;
    const expiredBefore = this.now() - this.queueDeadlineMs;
    for (const pending of this.queue) {
      if (pending.queuedAt <= expiredBefore) {
        this.metrics.acceptQueueExpired.inc();
        pending.reject(unavailable('accept waited too long for a busy mailbox; retry later'));
        continue;
      }
      const size = pending.job.recipients.length;
      const full = batch.length >= this.batchMax || (batch.length > 0 && entries + size > MAX_ENTRIES_PER_BATCH);
      const locked = pending.job.recipients.some((r) => this.busy.has(r.agentId));
      if (full || locked || ids.has(pending.job.envelopeId)) {
        rest.push(pending);
        continue;
      }
      batch.push(pending);
      ids.add(pending.job.envelopeId);
      entries += size;
    }
    this.queue = rest;
    return batch;
  }

  private async commit(batch: Pending[]): Promise<void> {
    this.metrics.acceptBatchSize.observe(batch.length);
    try {
      const outcomes = await this.runWithRetry(batch.map((pending) => pending.job));
      batch.forEach((pending, i) => pending.resolve(outcomes[i]));
      return;
    } catch (error) {
      if (batch.length === 1 || isUnavailable(error)) {
        batch.forEach((pending) => pending.reject(toAsmtp(error)));
        return;
      }
    }
    for (const pending of batch) {
      try {
        pending.resolve((await this.runWithRetry([pending.job]))[0]);
      } catch (error) {
        pending.reject(toAsmtp(error));
      }
    }
  }

  private async runWithRetry(jobs: AcceptJob[]): Promise<AcceptOutcome[]> {
    const mailboxIds = mailboxesOf(jobs);
    const plain = jobs.every((job) => job.fileIds.length === 0);
    try {
      const known = plain ? this.rememberedStates(mailboxIds) : undefined;
      if (known) {
        const plan = planBatch(jobs, known, this.now());
        let written: 'written' | 'stale' | 'id_taken';
        try {
          written = await this.envelopes.insertAllIfCurrent(plan.envelopes, plan.entries, plan.states, expectedSeqs(plan, known));
        } catch (error) {
          if (isUnavailable(error)) throw error;
          written = 'stale'; // any other failure: trust nothing remembered, let the lock decide
        }
        if (written === 'written') return this.remember(plan);
        // An id taken (a retry, a collision) leaves the states current; a mailbox moved on by
        // another writer (or gone) does not. Either way the locking path decides.
        if (written === 'stale') this.markContended(mailboxIds);
      }
      for (let attempt = 1; ; attempt++) {
        try {
          if (plain) {
            try {
              return this.remember(await this.runInOneStatement(jobs));
            } catch (error) {
              if (!(error instanceof IdTaken)) throw error;
            }
          }
          return this.remember(await this.run(jobs));
        } catch (error) {
          const code = (error as { code?: string }).code;
          if (attempt >= 3 || code === undefined || !RETRYABLE_SQLSTATE.has(code)) throw error;
        }
      }
    } catch (error) {
      // The outcome of a failed commit may be unknown (a lost connection): remember nothing.
      for (const id of mailboxIds) this.remembered.delete(id);
      throw error;
    }
  }

  /** The remembered state of every mailbox, unless one is unknown or recently contended. */
  private rememberedStates(mailboxIds: readonly number[]): MailboxState[] | undefined {
    const now = Date.now();
    const states: MailboxState[] = [];
    for (const id of mailboxIds) {
      const until = this.contended.get(id);
      if (until !== undefined) {
        if (until > now) return undefined;
        this.contended.delete(id);
      }
      const state = this.remembered.get(id);
      if (state === undefined) return undefined;
      states.push(state);
    }
    return states;
  }

  private markContended(mailboxIds: readonly number[]): void {
    const until = Date.now() + CONTENDED_MS;
    for (const id of mailboxIds) {
      this.remembered.delete(id);
      this.contended.delete(id);
      this.contended.set(id, until);
    }
    trimOldest(this.contended);
    this.metrics.acceptLockFallbacks.inc();
  }

  private remember(committed: Committed): AcceptOutcome[] {
    for (const state of committed.states) {
      this.remembered.delete(state.agent_id);
      this.remembered.set(state.agent_id, state);
    }
    trimOldest(this.remembered);
    return committed.outcomes;
  }

  /**
   * The common case (no file to claim, no id taken): lock, then one statement writes envelopes,
   * entries and mailbox states. An id that turns out to be taken rolls it back (`IdTaken`).
   */
  private runInOneStatement(jobs: AcceptJob[]): Promise<Committed> {
    return this.envelopes.transaction(async (trx) => {
      const now = this.now();
      const mailboxIds = mailboxesOf(jobs);
      const locked = await this.envelopes.lockMailboxes(trx, mailboxIds);
      if (locked.length !== mailboxIds.length) throw new MailboxGone();
      const plan = planBatch(jobs, locked, now);
      const inserted = await this.envelopes.insertAll(trx, plan.envelopes, plan.entries, plan.states);
      if (inserted.size !== jobs.length) throw new IdTaken();
      return plan;
    });
  }

  private run(jobs: AcceptJob[]): Promise<Committed> {
    return this.envelopes.transaction(async (trx) => {
      const now = this.now();
      const mailboxIds = mailboxesOf(jobs);
      const locked = await this.envelopes.lockMailboxes(trx, mailboxIds);
      if (locked.length !== mailboxIds.length) throw new MailboxGone();

      const tentative = new Map(locked.map((state) => [state.agent_id, state.last_created_at]));
      const createdAts = jobs.map((job) => {
        const createdAt = nextCreatedAt(now, job.recipients.map((r) => tentative.get(r.agentId)!));
        for (const r of job.recipients) tentative.set(r.agentId, createdAt);
        return createdAt;
      });
      const headers = jobs.map((job, i) =>
        headerJsonOf(job.stored, { ...job.derived, created_at: createdAts[i] }, job.extensions),
      );
      const inserted = await this.envelopes.insertEnvelopes(
        trx,
        jobs.map((job, i) => envelopeRow(job, createdAts[i], now, headers[i])),
      );

      const states = new Map<number, MailboxState>(locked.map((state) => [state.agent_id, { ...state }]));
      const changed = new Set<number>();
      const entries: EntryRow[] = [];
      const outcomes: AcceptOutcome[] = [];
      for (const [i, job] of jobs.entries()) {
        if (!inserted.has(job.envelopeId)) {
          outcomes.push({ kind: 'exists' });
          continue;
        }
        if (job.fileIds.length > 0) {
          const claimed = await this.envelopes.claimFiles(trx, job.envelopeId, job.senderId, job.fileIds);
          if (claimed !== job.fileIds.length) throw new FileClaimRefused();
        }
        const allocated = job.recipients.map((r) => {
          const state = states.get(r.agentId)!;
          state.last_seq += 1;
          state.last_created_at = createdAts[i];
          changed.add(r.agentId);
          entries.push({
            mailbox_id: r.agentId,
            seq: state.last_seq,
            envelope_id: job.envelopeId,
            created_at: createdAts[i],
            kind: r.kind,
          });
          return { mailboxId: r.agentId, seq: state.last_seq };
        });
        outcomes.push({ kind: 'stored', createdAt: createdAts[i], receivedMs: now, header: headers[i], entries: allocated });
      }
      const advanced = [...changed].map((id) => states.get(id)!);
      await this.envelopes.insertEntries(trx, entries);
      await this.envelopes.advanceMailboxes(trx, advanced);
      return { outcomes, states: advanced };
    });
  }
}

/** Each advanced mailbox's `last_seq` in `known`, in the order of `plan.states`. */
function expectedSeqs(plan: BatchPlan, known: readonly MailboxState[]): number[] {
  const before = new Map(known.map((state) => [state.agent_id, state.last_seq]));
  return plan.states.map((state) => before.get(state.agent_id)!);
}

/** The distinct recipient mailboxes of some jobs. */
function mailboxesOf(jobs: readonly AcceptJob[]): number[] {
  return [...new Set(jobs.flatMap((job) => job.recipients.map((r) => r.agentId)))];
}

/** Drop the oldest entries (insertion order) beyond `REMEMBERED_MAX`. */
function trimOldest(map: Map<number, unknown>): void {
  for (const id of map.keys()) {
    if (map.size <= REMEMBERED_MAX) return;
    map.delete(id);
  }
}

function toAsmtp(error: unknown): unknown {
  if (error instanceof MailboxGone) return notFound();
  if (error instanceof FileClaimRefused) return badRequest('INVALID_FILE', 'file_id is unknown, not yours, or already used');
  // A recipient deleted mid-accept surfaces as a foreign-key violation on its mailbox.
  if ((error as { code?: string }).code === '23503') return notFound();
  return error;
}
