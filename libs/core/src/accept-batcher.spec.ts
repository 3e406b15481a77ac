import { loadConfig } from '#config';
import type { EnvelopesRepository, MailboxState } from '#db';
import { AsmtpError } from '#domain';
import { Metrics } from '#metrics';
import { AcceptBatcher, BESIDE_PATIENCE_MS, type AcceptJob } from './accept-batcher';

/** A repository whose transactions the test releases by hand (each waits, like one on a locked row). */
function gatedRepository() {
  const transactions: Array<{ mailboxes: number[]; release: (fail?: Error) => void }> = [];
  const repository = {
    transaction: <T>(fn: (trx: unknown) => Promise<T>) =>
      new Promise<T>((resolve, reject) => {
        const locked: number[] = [];
        const trx = {};
        const entry = {
          mailboxes: locked,
          release: (fail?: Error) => (fail ? reject(fail) : fn(trx).then(resolve, reject)),
        };
        transactions.push(entry);
      }),
    lockMailboxes: async (_trx: unknown, ids: readonly number[]): Promise<MailboxState[]> =>
      ids.map((agent_id) => ({ agent_id, last_seq: 0, last_created_at: 0 })),
    insertAll: async (_trx: unknown, envelopes: ReadonlyArray<{ id: string }>) => new Set(envelopes.map((e) => e.id)),
  };
  return { transactions, repository: repository as unknown as EnvelopesRepository };
}

function job(id: string, mailbox: number): AcceptJob {
  return {
    envelopeId: id,
    senderId: 99,
    recipients: [{ agentId: mailbox, handle: `@m${mailbox}`, kind: 'to' }],
    stored: {
      id,
      to: [`@m${mailbox}`],
      date_ms: 1,
      content_parts: [{ type: 'text', text: 'x' }],
    } as unknown as AcceptJob['stored'],
    body: '{}',
    derived: { type_hint: 'text', size_hint: 1 },
    extensions: {},
    selfAddressed: false,
    searchText: '',
    fileIds: [],
  };
}

/** `job` to several mailboxes, each with the state its lookup read (`[mailbox, last_seq, last_created_at]`, or a bare id: none). */
function lookedUpJob(id: string, recipients: ReadonlyArray<number | [number, number, number]>): AcceptJob {
  const base = job(id, 0);
  return {
    ...base,
    recipients: recipients.map((r) =>
      typeof r === 'number'
        ? { agentId: r, handle: `@m${r}`, kind: 'to' as const }
        : { agentId: r[0], handle: `@m${r[0]}`, kind: 'to' as const, lastSeq: r[1], lastCreatedAt: r[2] },
    ),
  };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

/** A Postgres-mode config (the database is never reached) with these settings. */
const specConfig = (env: Record<string, string> = {}) =>
  loadConfig({
    DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/unused',
    ROOST_ADMIN_TOKEN: 'admin-token-for-the-spec',
    ...env,
  });

describe('AcceptBatcher queue deadline', () => {
  const config = specConfig({
    ROOST_ACCEPT_WRITERS: '1',
    ROOST_DB_STATEMENT_TIMEOUT_MS: '1000',
  });

  it('answers 503 for a job that waited a statement timeout behind a stuck batch, without starting another statement', async () => {
    const { transactions, repository } = gatedRepository();
    const metrics = new Metrics();
    const batcher = new AcceptBatcher(repository, metrics, config);
    let clock = 10_000;
    batcher.now = () => clock;

    const first = batcher.submit(job('A', 1));
    const waiting = batcher.submit(job('B', 1)); // its mailbox is held by the batch in flight
    expect(transactions).toHaveLength(1);

    clock += 1_000; // the first batch waited a whole statement timeout on a row lock
    const timeout = Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
    transactions[0].release(timeout);
    await expect(first).rejects.toBe(timeout);
    const error = await waiting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AsmtpError);
    expect((error as AsmtpError).status).toBe(503);
    expect((error as AsmtpError).code).toBe('UNAVAILABLE');
    await flush();
    expect(transactions).toHaveLength(1); // no statement that could wait one more timeout
    expect((await metrics.acceptQueueExpired.get()).values[0].value).toBe(1);
  });

  it('still commits a job that waited less than the statement timeout', async () => {
    const { transactions, repository } = gatedRepository();
    const metrics = new Metrics();
    const batcher = new AcceptBatcher(repository, metrics, config);
    let clock = 10_000;
    batcher.now = () => clock;

    const first = batcher.submit(job('A', 1));
    const waiting = batcher.submit(job('B', 1));
    clock += 999;
    transactions[0].release();
    await expect(first).resolves.toMatchObject({ kind: 'stored' });
    await flush();
    expect(transactions).toHaveLength(2);
    transactions[1].release();
    await expect(waiting).resolves.toMatchObject({ kind: 'stored' });
    expect((await metrics.acceptQueueExpired.get()).values[0]?.value ?? 0).toBe(0);
  });
});

describe('AcceptBatcher hand-over', () => {
  it('starts the next batch before the callers of the one that committed are answered', async () => {
    const { transactions, repository } = gatedRepository();
    const batcher = new AcceptBatcher(repository, new Metrics(), specConfig({ ROOST_ACCEPT_WRITERS: '1' }));
    const first = batcher.submit(job('A', 1));
    const second = batcher.submit(job('B', 1)); // waits: its mailbox is held by the batch in flight
    expect(transactions).toHaveLength(1);
    // What the first caller sees when it is answered: whether the second batch had already started.
    const startedWhenAnswered = first.then(() => transactions.length);
    transactions[0].release();
    await expect(startedWhenAnswered).resolves.toBe(2);
    transactions[1].release();
    await expect(second).resolves.toMatchObject({ kind: 'stored' });
  });

  it('on the embedded PGlite answers them first: its next statement would run on this thread before the answers', async () => {
    const { transactions, repository } = gatedRepository();
    const config = loadConfig({ ROOST_ADMIN_TOKEN: 'admin-token-for-the-spec' });
    expect(config.databaseUrl).toBeNull();
    const batcher = new AcceptBatcher(repository, new Metrics(), config);
    const first = batcher.submit(job('A', 1));
    await flush(); // PGlite: the batch starts after a turn that brought no new request
    await flush();
    const second = batcher.submit(job('B', 1));
    expect(transactions).toHaveLength(1);
    const startedWhenAnswered = first.then(() => transactions.length);
    transactions[0].release();
    await expect(startedWhenAnswered).resolves.toBe(1);
    await flush();
    expect(transactions).toHaveLength(2);
    transactions[1].release();
    await expect(second).resolves.toMatchObject({ kind: 'stored' });
  });
});

/** A repository over in-memory mailbox states that another writer can move on. */
function memoryRepository() {
  const seqs = new Map<number, number>();
  const calls = { transactions: 0, lockFree: 0, epochs: [] as Array<number | null> };
  const policy = { epoch: 1 };
  const stateOf = (agent_id: number): MailboxState => ({
    agent_id,
    last_seq: seqs.get(agent_id) ?? 0,
    last_created_at: 0,
  });
  const repository = {
    transaction: async <T>(fn: (trx: unknown) => Promise<T>) => {
      calls.transactions++;
      const before = new Map(seqs);
      try {
        return await fn({});
      } catch (error) {
        seqs.clear(); // rolled back
        for (const [id, seq] of before) seqs.set(id, seq);
        throw error;
      }
    },
    lockMailboxes: async (_trx: unknown, ids: readonly number[]) => ids.map(stateOf),
    insertAll: async (
      _trx: unknown,
      envelopes: ReadonlyArray<{ id: string }>,
      _entries: unknown,
      states: MailboxState[],
    ) => {
      for (const state of states) seqs.set(state.agent_id, state.last_seq);
      return new Set(envelopes.map((e) => e.id));
    },
    policyCurrent: async (_trx: unknown, epoch: number) => epoch === policy.epoch,
    insertAllIfCurrent: async (
      _envelopes: unknown,
      _entries: unknown,
      states: MailboxState[],
      expected: number[],
      epoch: number | null = null,
    ) => {
      calls.lockFree++;
      calls.epochs.push(epoch);
      if (epoch !== null && epoch !== policy.epoch) return 'policy_stale';
      if (states.some((state, i) => (seqs.get(state.agent_id) ?? 0) !== expected[i])) return 'stale';
      for (const state of states) seqs.set(state.agent_id, state.last_seq);
      return 'written';
    },
  };
  return { seqs, calls, policy, repository: repository as unknown as EnvelopesRepository };
}

describe('AcceptBatcher lock-free path', () => {
  const config = specConfig();

  it('writes lock-free against the state its last commit left, and after another writer keeps the mailbox locked for 5 s of its clock', async () => {
    const { seqs, calls, repository } = memoryRepository();
    const metrics = new Metrics();
    const batcher = new AcceptBatcher(repository, metrics, config);
    let clock = 50_000;
    batcher.now = () => clock;

    await expect(batcher.submit(job('A', 1))).resolves.toMatchObject({ entries: [{ mailboxId: 1, seq: 1 }] });
    expect(calls).toMatchObject({ transactions: 1, lockFree: 0 }); // nothing remembered yet: under the lock
    await expect(batcher.submit(job('B', 1))).resolves.toMatchObject({ entries: [{ mailboxId: 1, seq: 2 }] });
    expect(calls).toMatchObject({ transactions: 1, lockFree: 1 });

    seqs.set(1, 5); // another node committed to the mailbox
    await expect(batcher.submit(job('C', 1))).resolves.toMatchObject({ entries: [{ mailboxId: 1, seq: 6 }] });
    expect(calls).toMatchObject({ transactions: 2, lockFree: 2 }); // stale, then the lock
    expect((await metrics.acceptLockFallbacks.get()).values[0].value).toBe(1);

    clock += 4_999;
    await batcher.submit(job('D', 1));
    expect(calls).toMatchObject({ transactions: 3, lockFree: 2 }); // still contended
    clock += 1;
    await expect(batcher.submit(job('E', 1))).resolves.toMatchObject({ entries: [{ mailboxId: 1, seq: 8 }] });
    expect(calls).toMatchObject({ transactions: 3, lockFree: 3 });
  });
});

describe('AcceptBatcher lock-free path with looked-up mailbox states', () => {
  const config = specConfig();
  const fallbacks = async (metrics: Metrics) => (await metrics.acceptLockFallbacks.get()).values[0]?.value ?? 0;

  it("writes a mailbox's first envelope lock-free against the looked-up state, then the newer of lookup and memory", async () => {
    const { seqs, calls, repository } = memoryRepository();
    const metrics = new Metrics();
    const batcher = new AcceptBatcher(repository, metrics, config);
    batcher.now = () => 50_000;
    seqs.set(1, 3);

    // created_at is stamped above the looked-up last_created_at (here ahead of the clock).
    const first = await batcher.submit(lookedUpJob('A', [[1, 3, 60_000]]));
    expect(first).toMatchObject({ kind: 'stored', entries: [{ mailboxId: 1, seq: 4 }] });
    expect(first.kind === 'stored' && first.createdAt).toBeGreaterThan(60_000);
    expect(calls).toMatchObject({ transactions: 0, lockFree: 1 });

    // A lookup older than this node's commit loses to the remembered state.
    await expect(batcher.submit(lookedUpJob('B', [[1, 3, 60_000]]))).resolves.toMatchObject({
      entries: [{ mailboxId: 1, seq: 5 }],
    });
    // Another writer moved the mailbox on; a lookup that read it since wins over the memory.
    seqs.set(1, 9);
    await expect(batcher.submit(lookedUpJob('C', [[1, 9, 70_000]]))).resolves.toMatchObject({
      entries: [{ mailboxId: 1, seq: 10 }],
    });
    expect(calls).toMatchObject({ transactions: 0, lockFree: 3 });
    expect(await fallbacks(metrics)).toBe(0);
  });

  it('a batch of remembered and looked-up mailboxes is lock-free; one mailbox neither takes the lock', async () => {
    const { seqs, calls, repository } = memoryRepository();
    const batcher = new AcceptBatcher(repository, new Metrics(), config);
    seqs.set(2, 7);
    await batcher.submit(job('A', 1)); // under the lock: now remembered
    expect(calls).toMatchObject({ transactions: 1, lockFree: 0 });
    await expect(batcher.submit(lookedUpJob('B', [1, [2, 7, 0]]))).resolves.toMatchObject({
      entries: [
        { mailboxId: 1, seq: 2 },
        { mailboxId: 2, seq: 8 },
      ],
    });
    expect(calls).toMatchObject({ transactions: 1, lockFree: 1 });
    await expect(batcher.submit(lookedUpJob('C', [1, 2, 3]))).resolves.toMatchObject({
      entries: [
        { mailboxId: 1, seq: 3 },
        { mailboxId: 2, seq: 9 },
        { mailboxId: 3, seq: 1 },
      ],
    });
    expect(calls).toMatchObject({ transactions: 2, lockFree: 1 });
  });

  it('a looked-up state another writer beat fails whole: the lock writes gapless, and the mailbox is contended', async () => {
    const { seqs, calls, repository } = memoryRepository();
    const metrics = new Metrics();
    const batcher = new AcceptBatcher(repository, metrics, config);
    let clock = 50_000;
    batcher.now = () => clock;
    seqs.set(1, 5); // moved on after the lookup read 4
    await expect(batcher.submit(lookedUpJob('A', [[1, 4, 0]]))).resolves.toMatchObject({
      entries: [{ mailboxId: 1, seq: 6 }],
    });
    expect(calls).toMatchObject({ transactions: 1, lockFree: 1 });
    expect(await fallbacks(metrics)).toBe(1);
    // Two writers at once: a fresh lookup does not bring the mailbox back before CONTENDED_MS.
    await batcher.submit(lookedUpJob('B', [[1, 6, 0]]));
    expect(calls).toMatchObject({ transactions: 2, lockFree: 1 });
    clock += 5_000;
    await expect(batcher.submit(lookedUpJob('C', [[1, 7, 0]]))).resolves.toMatchObject({
      entries: [{ mailboxId: 1, seq: 8 }],
    });
    expect(calls).toMatchObject({ transactions: 2, lockFree: 2 });
  });
});

describe('AcceptBatcher stage timings', () => {
  const config = specConfig({
    ROOST_ACCEPT_WRITERS: '1',
  });

  const countOf = async (metrics: Metrics, stage: string) =>
    (await metrics.acceptStage.get()).values.find(
      (v) => v.metricName === 'roost_accept_stage_seconds_count' && v.labels.stage === stage,
    )?.value ?? 0;

  it('observes the queue and write stages once per committed job, the queue wait of a job behind a busy mailbox included', async () => {
    const { transactions, repository } = gatedRepository();
    const metrics = new Metrics();
    const batcher = new AcceptBatcher(repository, metrics, config);

    const first = batcher.submit(job('A', 1));
    const second = batcher.submit(job('B', 1)); // waits in the queue for the batch holding mailbox 1
    expect(await countOf(metrics, 'queue')).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    transactions[0].release();
    await first;
    await flush();
    expect(await countOf(metrics, 'write')).toBe(1);
    expect(await countOf(metrics, 'queue')).toBe(2);
    const queued = (await metrics.acceptStage.get()).values.find(
      (v) => v.metricName === 'roost_accept_stage_seconds_sum' && v.labels.stage === 'queue',
    )!.value;
    expect(queued).toBeGreaterThanOrEqual(0.015); // B's wait behind A's commit
    transactions[1].release();
    await second;
    expect(await countOf(metrics, 'write')).toBe(2);
  });
});

describe('AcceptBatcher batches beside one in flight', () => {
  // batchMax 8: two ready jobs (a quarter) justify a batch beside one in flight.
  const config = specConfig({
    ROOST_ACCEPT_WRITERS: '4',
    ROOST_ACCEPT_BATCH_MAX: '8',
  });

  it('a lone job starts at once; a job for another mailbox waits for the batch in flight and joins the next one with the rest', async () => {
    const gated = gatedRepository();
    const batcher = new AcceptBatcher(gated.repository, new Metrics(), config);
    // The clock stands still while the jobs arrive: a pause of BESIDE_PATIENCE_MS between two
    // lines (GC, a busy CI machine) would rightly start B beside A.
    const clock = jest.spyOn(performance, 'now').mockReturnValue(performance.now());
    const first = batcher.submit(job('A', 1));
    expect(gated.transactions).toHaveLength(1); // nothing in flight: no wait
    const second = batcher.submit(job('B', 2)); // one ready job, fewer than a quarter of a batch
    expect(gated.transactions).toHaveLength(1);
    const third = batcher.submit(job('C', 1)); // its mailbox is held: not ready
    expect(gated.transactions).toHaveLength(1);
    gated.transactions[0].release();
    clock.mockRestore();
    await first;
    await flush();
    // B and C went together, in one batch, once A's batch ended.
    expect(gated.transactions).toHaveLength(2);
    gated.transactions[1].release();
    await expect(second).resolves.toMatchObject({ kind: 'stored', entries: [{ mailboxId: 2, seq: 1 }] });
    await expect(third).resolves.toMatchObject({ kind: 'stored', entries: [{ mailboxId: 1 }] });
  });

  it('a quarter of a batch ready starts beside the batch in flight at once', async () => {
    const gated = gatedRepository();
    const batcher = new AcceptBatcher(gated.repository, new Metrics(), config);
    const first = batcher.submit(job('A', 1));
    const second = batcher.submit(job('B', 2));
    const third = batcher.submit(job('C', 3)); // the second ready job: 2 of batchMax 8
    expect(gated.transactions).toHaveLength(2);
    gated.transactions[1].release();
    await expect(Promise.all([second, third])).resolves.toHaveLength(2);
    gated.transactions[0].release();
    await first;
  });

  it(`a batch in flight for ${BESIDE_PATIENCE_MS} ms no longer holds up other mailboxes`, async () => {
    const gated = gatedRepository();
    const batcher = new AcceptBatcher(gated.repository, new Metrics(), config);
    const clock = jest.spyOn(performance, 'now').mockReturnValue(performance.now()); // as above
    const first = batcher.submit(job('A', 1)); // stuck, as on a row lock
    const second = batcher.submit(job('B', 2));
    expect(gated.transactions).toHaveLength(1);
    clock.mockRestore();
    await new Promise((resolve) => setTimeout(resolve, BESIDE_PATIENCE_MS * 4));
    expect(gated.transactions).toHaveLength(2); // B started beside the stuck batch
    gated.transactions[1].release();
    await expect(second).resolves.toMatchObject({ kind: 'stored' });
    gated.transactions[0].release();
    await first;
  });

  it('with batching off (batch max 1) every job starts beside the others while a writer is free, as before', async () => {
    const gated = gatedRepository();
    const single = specConfig({
      ROOST_ACCEPT_WRITERS: '2',
      ROOST_ACCEPT_BATCH_MAX: '1',
    });
    const batcher = new AcceptBatcher(gated.repository, new Metrics(), single);
    const jobs = [batcher.submit(job('A', 1)), batcher.submit(job('B', 2)), batcher.submit(job('C', 3))];
    expect(gated.transactions).toHaveLength(2); // two writers
    gated.transactions.forEach((t) => t.release());
    await Promise.all(jobs.slice(0, 2));
    await flush();
    gated.transactions[2].release();
    await jobs[2];
  });
});

describe('AcceptBatcher policy epoch of kept sender lookups', () => {
  const config = specConfig();
  const kept = (id: string, mailbox: number, policyEpoch: number): AcceptJob => ({ ...job(id, mailbox), policyEpoch });

  it('commits with the epoch of its kept lookups, and on a moved epoch stores nothing of theirs (policy_stale)', async () => {
    const { seqs, calls, policy, repository } = memoryRepository();
    const batcher = new AcceptBatcher(repository, new Metrics(), config);
    await batcher.submit(job('A', 1)); // under the lock: the state is remembered
    await expect(batcher.submit(kept('B', 1, 1))).resolves.toMatchObject({ kind: 'stored' });
    expect(calls.epochs).toEqual([1]);

    policy.epoch = 2; // a block, a token rotation, a policy edit somewhere
    await expect(batcher.submit(kept('C', 1, 1))).resolves.toEqual({ kind: 'policy_stale' });
    expect(seqs.get(1)).toBe(2);
    // Nothing about the mailbox was wrong: the next send (looked up afresh) is still lock-free.
    await expect(batcher.submit(kept('D', 1, 2))).resolves.toMatchObject({ entries: [{ mailboxId: 1, seq: 3 }] });
    expect(calls).toMatchObject({ transactions: 1, lockFree: 3 });
  });

  it("in one batch, a kept lookup older than another's is stale without a statement; a send looked up by the accept path commits", async () => {
    const { calls, policy, repository } = memoryRepository();
    const batcher = new AcceptBatcher(repository, new Metrics(), config);
    await batcher.submit(job('A', 1));
    await batcher.submit(job('B', 2));
    policy.epoch = 3;
    const [old, current, plain] = await Promise.all([
      batcher.submit(kept('C', 1, 2)),
      batcher.submit(kept('D', 2, 3)),
      batcher.submit(job('E', 1)),
    ]);
    expect(old).toEqual({ kind: 'policy_stale' });
    expect(current).toMatchObject({ kind: 'stored' });
    expect(plain).toMatchObject({ kind: 'stored' });
    expect(calls.epochs.at(-1)).toBe(3);
  });

  it('when the epoch moved under a whole batch, the sends without a kept lookup are committed alone', async () => {
    const { calls, policy, repository } = memoryRepository();
    const batcher = new AcceptBatcher(repository, new Metrics(), config);
    await batcher.submit(job('A', 1));
    policy.epoch = 5;
    const [stale, plain] = await Promise.all([batcher.submit(kept('B', 1, 4)), batcher.submit(job('C', 1))]);
    expect(stale).toEqual({ kind: 'policy_stale' });
    expect(plain).toMatchObject({ kind: 'stored', entries: [{ mailboxId: 1, seq: 2 }] });
    expect(calls.epochs).toEqual([4, null]);
  });

  it('the locking path checks the epoch too, in the transaction, and stores nothing when it moved', async () => {
    const { seqs, calls, policy, repository } = memoryRepository();
    const batcher = new AcceptBatcher(repository, new Metrics(), config);
    policy.epoch = 9;
    // Nothing remembered of mailbox 7: the locking path.
    await expect(batcher.submit(kept('A', 7, 8))).resolves.toEqual({ kind: 'policy_stale' });
    expect(seqs.get(7)).toBeUndefined();
    await expect(batcher.submit(kept('B', 7, 9))).resolves.toMatchObject({ entries: [{ mailboxId: 7, seq: 1 }] });
    expect(calls).toMatchObject({ transactions: 2, lockFree: 0 });
  });
});
