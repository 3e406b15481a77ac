import { Injectable } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { Metrics } from '#metrics';
import { EnvelopesRepository, type MailboxState, type Tx } from '#db';
import { badRequest, isUnavailable, notFound, unavailable } from '#domain';
import {
  allocateEntries,
  expectedSeqs,
  lookedUpStates,
  mailboxesOf,
  planBatch,
  stampBatch,
  type AcceptJob,
  type AcceptOutcome,
  type Committed,
} from './batch-plan';
import { MailboxStateCache, type CompareAndSetResult } from './mailbox-state-cache';
import { PumpScheduler } from './pump-scheduler';

export type { AcceptJob, AcceptOutcome } from './batch-plan';

interface Pending {
  job: AcceptJob;
  /** When it was submitted (`now()`), for the queue deadline. */
  queuedAt: number;
  /** `performance.now()` at submit, for the queue stage of `roost_accept_stage_seconds`. */
  submittedAt: number;
  resolve: (outcome: AcceptOutcome) => void;
  reject: (error: unknown) => void;
}

/** A recipient's mailbox vanished between the policy check and the commit (agent deleted). */
class MailboxGone extends Error {}
/** A `file_id` could not be claimed (unknown, foreign, already bound, or twice in one envelope). */
class FileClaimRefused extends Error {}
/** An envelope id of the batch already exists: redo the batch statement by statement. */
class IdTaken extends Error {}
/** The policy epoch moved on since a job's kept sender lookup (RS411): nothing was written. */
class PolicyStale extends Error {}

const POLICY_STALE: AcceptOutcome = { kind: 'policy_stale' };

const MAX_ENTRIES_PER_BATCH = 20_000;
const RETRYABLE_SQLSTATE = new Set(['40P01', '40001']);
/**
 * How long the batches in flight may hold back a new one (see `mayStartBeside`): a few times a
 * healthy accept statement's commit (1–3 ms), far below any lock wait worth routing around.
 */
export const BESIDE_PATIENCE_MS = 5;

/**
 * Coalesces concurrent accepts into shared transactions. Each transaction locks the recipients'
 * mailbox rows in id order, stamps `created_at` strictly above each mailbox's last one, inserts the
 * envelopes (an existing id is skipped, never overwritten), allocates per-mailbox `seq`, and
 * commits; only then does each caller get its outcome, so `202` still means durable. A batch
 * that fails because of one envelope is re-run one envelope per transaction.
 *
 * The common case skips the explicit transaction and the lock: a node writes in one statement
 * against each mailbox's newer known state, the one its own last commit left or the one the
 * sender's lookup read (so a fresh node, or one whose peer wrote the mailbox since, needs no lock),
 * and that statement fails whole when another writer (another api node, a worker) moved the
 * mailbox on since; the batch then takes the locking path, and that mailbox stays on it for a while.
 *
 * Jobs admitted by kept sender lookups carry the policy epoch those were read at; the batch's
 * commit (either path) checks the newest of them and, when the epoch moved on, stores nothing of
 * theirs: they answer `policy_stale` and `AcceptService` looks them up afresh.
 */
@Injectable()
export class AcceptBatcher {
  private queue: Pending[] = [];
  private running = 0;
  /** Embedded PGlite: a batch starts on the next event-loop turn, so that turn's accepts join it. */
  private readonly scheduler: PumpScheduler;
  /**
   * Postgres: a batch that committed hands its writer over before its callers are answered (see
   * `commit`). Not on PGlite, whose statements run on this thread: the next batch would run before
   * the answers went out.
   */
  private readonly handOverFirst: boolean;
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
  /**
   * Queued jobs that justify a batch beside those in flight without waiting for them (a quarter
   * of `batchMax`, at least 1); see `mayStartBeside`.
   */
  private readonly besideMin: number;
  /** `performance.now()` at each batch in flight's start. */
  private readonly inFlightSince = new Set<{ at: number }>();
  /** Pumps again once the youngest batch in flight has run `BESIDE_PATIENCE_MS`. */
  private patience: ReturnType<typeof setTimeout> | undefined;
  /** Mailbox states this node's commits left, and mailboxes other writers contend, on `now()`. */
  private readonly cache = new MailboxStateCache(() => this.now());
  /** Overridable for tests that need an injected clock. */
  now: () => number = Date.now;

  constructor(
    private readonly envelopes: EnvelopesRepository,
    private readonly metrics: Metrics,
    @InjectConfig() config: Config,
  ) {
    const embedded = config.databaseUrl === null;
    // PGlite has one session: more writers would only queue behind its lock.
    this.writers = embedded ? 1 : config.accept.writers;
    // PGlite runs a statement synchronously on the event loop: a batch started at once for the
    // first accept of a turn would commit it alone while the turn's other accepts wait for the next.
    this.scheduler = new PumpScheduler(embedded, () => this.pump());
    this.handOverFirst = !embedded;
    this.batchMax = config.accept.batchMax;
    this.besideMin = Math.max(1, Math.ceil(this.batchMax / 4));
    this.queueDeadlineMs = config.db.statementTimeoutMs;
  }

  submit(job: AcceptJob): Promise<AcceptOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job, queuedAt: this.now(), submittedAt: performance.now(), resolve, reject });
      this.scheduler.request();
    });
  }

  private pump(): void {
    while (this.running < this.writers && this.queue.length > 0) {
      if (this.running > 0 && !this.mayStartBeside()) return;
      const batch = this.take();
      if (batch.length === 0) return; // everything queued waits on a mailbox a batch holds
      const mailboxes = mailboxesOf(batch.map((pending) => pending.job));
      for (const id of mailboxes) this.busy.set(id, (this.busy.get(id) ?? 0) + 1);
      this.running++;
      const since = { at: performance.now() };
      this.inFlightSince.add(since);
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        for (const id of mailboxes) {
          const left = (this.busy.get(id) ?? 1) - 1;
          if (left > 0) this.busy.set(id, left);
          else this.busy.delete(id);
        }
        this.inFlightSince.delete(since);
        this.running--;
        this.pump();
      };
      void this.commit(batch, mailboxes, release).finally(release);
    }
  }

  /**
   * Whether a batch may start beside those in flight. A batch of a few envelopes costs the process
   * and Postgres nearly what a batch of many does, so queued jobs wait for the batches in flight
   * (whose end pumps them all into one batch) unless a quarter of a full batch could start now,
   * or the youngest batch in flight has run `BESIDE_PATIENCE_MS` (a slow commit or a lock wait
   * must not hold up other mailboxes). Letting every job start its own statement while a writer
   * was free split 32 senders writing to 32 mailboxes (`accept-spread`) into batches of 4 at 4
   * writers: 3,634 envelopes/s, against 5,307 in batches of 15 this way (docs/benchmarks.md).
   */
  private mayStartBeside(): boolean {
    let youngest = 0;
    for (const since of this.inFlightSince) youngest = Math.max(youngest, since.at);
    const waited = performance.now() - youngest;
    if (waited >= BESIDE_PATIENCE_MS || this.ready() >= this.besideMin) return true;
    if (this.patience === undefined) {
      this.patience = setTimeout(
        () => {
          this.patience = undefined;
          this.pump();
        },
        Math.ceil(BESIDE_PATIENCE_MS - waited),
      );
    }
    return false;
  }

  /** How many queued jobs `take` would take now (at most `besideMin`, enough to decide). */
  private ready(): number {
    let ready = 0;
    const ids = new Set<string>();
    for (const pending of this.queue) {
      if (ids.has(pending.job.envelopeId) || pending.job.recipients.some((r) => this.busy.has(r.agentId))) continue;
      ids.add(pending.job.envelopeId);
      if (++ready >= this.besideMin) break;
    }
    return ready;
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

  /**
   * `mailboxes`: the queued batch's (`mailboxesOf` its jobs), computed once by `pump`. `release`
   * frees its writer and mailboxes and pumps. On Postgres it is called as soon as the batch has
   * committed, before its callers are answered, so that the next batch's statement is on its way
   * (written to the socket within `pump`) while this process writes the answers, which otherwise
   * ran first; `pump` calls it again when the batch ends, which does nothing the second time.
   */
  private async commit(queued: Pending[], mailboxes: number[], release: () => void): Promise<void> {
    this.metrics.acceptBatchSize.observe(queued.length);
    const started = performance.now();
    for (const pending of queued) this.metrics.acceptStages.queue((started - pending.submittedAt) / 1000);
    // The epoch only grows: a job whose kept lookup is older than another's in the batch is stale.
    const epoch = policyEpochOf(queued.map((pending) => pending.job));
    const batch = queued.filter((pending) => {
      const stale = pending.job.policyEpoch !== undefined && pending.job.policyEpoch < epoch!;
      if (stale) pending.resolve(POLICY_STALE);
      return !stale;
    });
    if (batch.length === 0) return;
    let alone = batch;
    try {
      const outcomes = await this.runWithRetry(
        batch.map((pending) => pending.job),
        batch.length === queued.length ? mailboxes : mailboxesOf(batch.map((pending) => pending.job)),
      );
      const written = (performance.now() - started) / 1000;
      for (let i = 0; i < batch.length; i++) this.metrics.acceptStages.write(written);
      if (this.handOverFirst) release();
      batch.forEach((pending, i) => pending.resolve(outcomes[i]));
      return;
    } catch (error) {
      if (error instanceof PolicyStale) {
        // Every job with a kept lookup is stale (they share the batch's epoch); the rest go alone.
        alone = [];
        for (const pending of batch) {
          if (pending.job.policyEpoch !== undefined) pending.resolve(POLICY_STALE);
          else alone.push(pending);
        }
      } else if (batch.length === 1 || isUnavailable(error)) {
        batch.forEach((pending) => pending.reject(toAsmtp(error)));
        return;
      }
    }
    for (const pending of alone) {
      try {
        pending.resolve((await this.runWithRetry([pending.job]))[0]);
      } catch (error) {
        if (error instanceof PolicyStale) pending.resolve(POLICY_STALE);
        else pending.reject(toAsmtp(error));
      }
    }
  }

  private async runWithRetry(jobs: AcceptJob[], mailboxIds = mailboxesOf(jobs)): Promise<AcceptOutcome[]> {
    const plain = jobs.every((job) => job.fileIds.length === 0);
    const epoch = policyEpochOf(jobs);
    try {
      const known = plain ? this.cache.statesOf(mailboxIds, lookedUpStates(jobs)) : undefined;
      if (known) {
        const plan = planBatch(jobs, known, this.now());
        let written: CompareAndSetResult;
        try {
          const result = await this.envelopes.insertAllIfCurrent(
            plan.envelopes,
            plan.entries,
            plan.states,
            expectedSeqs(plan, known),
            epoch,
          );
          if (result === 'policy_stale') throw new PolicyStale(); // the states it read stay current
          written = result;
        } catch (error) {
          if (isUnavailable(error) || error instanceof PolicyStale) throw error;
          written = 'stale'; // any other failure: trust nothing remembered, let the lock decide
        }
        if (this.cache.settle(mailboxIds, written, plan.states)) return plan.outcomes;
        // An id taken (a retry, a collision) leaves the states current; a mailbox moved on by
        // another writer (or gone) does not. Either way the locking path decides.
        if (written === 'stale') this.metrics.acceptLockFallbacks.inc();
      }
      for (let attempt = 1; ; attempt++) {
        try {
          if (plain) {
            try {
              return this.remember(await this.runInOneStatement(jobs, mailboxIds, epoch));
            } catch (error) {
              if (!(error instanceof IdTaken)) throw error;
            }
          }
          return this.remember(await this.run(jobs, mailboxIds, epoch));
        } catch (error) {
          const code = (error as { code?: string }).code;
          if (attempt >= 3 || code === undefined || !RETRYABLE_SQLSTATE.has(code)) throw error;
        }
      }
    } catch (error) {
      // The outcome of a failed commit may be unknown (a lost connection): remember nothing.
      if (!(error instanceof PolicyStale)) this.cache.forget(mailboxIds);
      throw error;
    }
  }

  private remember(committed: Committed): AcceptOutcome[] {
    this.cache.remember(committed.states);
    return committed.outcomes;
  }

  /**
   * One transaction that first locks the jobs' mailboxes (in id order) and reads their states, and
   * (with `epoch`, jobs admitted by kept lookups) last checks the policy epoch has not moved on.
   */
  private locked(
    mailboxIds: readonly number[],
    epoch: number | null,
    write: (trx: Tx, locked: MailboxState[], now: number) => Promise<Committed>,
  ): Promise<Committed> {
    return this.envelopes.transaction(async (trx) => {
      const now = this.now();
      const locked = await this.envelopes.lockMailboxes(trx, mailboxIds);
      if (locked.length !== mailboxIds.length) throw new MailboxGone();
      const committed = await write(trx, locked, now);
      // Last, just before the commit: a change committed while this transaction waited is seen.
      if (epoch !== null && !(await this.envelopes.policyCurrent(trx, epoch))) throw new PolicyStale();
      return committed;
    });
  }

  /**
   * The common case (no file to claim, no id taken): lock, then one statement writes envelopes,
   * entries and mailbox states. An id that turns out to be taken rolls it back (`IdTaken`).
   */
  private runInOneStatement(
    jobs: AcceptJob[],
    mailboxIds: readonly number[],
    epoch: number | null,
  ): Promise<Committed> {
    return this.locked(mailboxIds, epoch, async (trx, locked, now) => {
      const plan = planBatch(jobs, locked, now);
      const inserted = await this.envelopes.insertAll(trx, plan.envelopes, plan.entries, plan.states);
      if (inserted.size !== jobs.length) throw new IdTaken();
      return plan;
    });
  }

  /** Statement by statement: envelopes (an existing id is skipped), their files, entries, states. */
  private run(jobs: AcceptJob[], mailboxIds: readonly number[], epoch: number | null): Promise<Committed> {
    return this.locked(mailboxIds, epoch, async (trx, locked, now) => {
      const stamped = stampBatch(jobs, locked, now);
      const inserted = await this.envelopes.insertEnvelopes(trx, stamped.envelopes);
      for (const job of jobs) {
        if (!inserted.has(job.envelopeId) || job.fileIds.length === 0) continue;
        const claimed = await this.envelopes.claimFiles(trx, job.envelopeId, job.senderId, job.fileIds);
        if (claimed !== job.fileIds.length) throw new FileClaimRefused();
      }
      const plan = allocateEntries(jobs, stamped, locked, now, (job) => inserted.has(job.envelopeId));
      await this.envelopes.insertEntries(trx, plan.entries);
      await this.envelopes.advanceMailboxes(trx, plan.states);
      return plan;
    });
  }
}

/** The newest policy epoch among the jobs' kept lookups; null when none was kept. */
function policyEpochOf(jobs: readonly AcceptJob[]): number | null {
  let epoch: number | null = null;
  for (const job of jobs)
    if (job.policyEpoch !== undefined && (epoch === null || job.policyEpoch > epoch)) epoch = job.policyEpoch;
  return epoch;
}

function toAsmtp(error: unknown): unknown {
  if (error instanceof MailboxGone) return notFound();
  if (error instanceof FileClaimRefused)
    return badRequest('INVALID_FILE', 'file_id is unknown, not yours, or already used');
  // A recipient deleted mid-accept surfaces as a foreign-key violation on its mailbox.
  if ((error as { code?: string }).code === '23503') return notFound();
  return error;
}
