import { join } from 'node:path';
import type * as BatchPlanModule from '../libs/core/src/batch-plan';
import type * as StateCacheModule from '../libs/core/src/mailbox-state-cache';
import type { AcceptJob } from '../libs/core/src/batch-plan';

/**
 * Microbench of the accept batcher's lock-free path without the database: per batch, what
 * `AcceptBatcher.runWithRetry` computes around `insertAllIfCurrent` (the batch's mailboxes, the
 * looked-up states, the remembered states, the plan, the expected seqs, and settling the cache),
 * for batches of `ROOST_BENCH_JOBS` (default 2, the `fanout` bench's mean) envelopes to 50 of 2,000
 * mailboxes. Alternates rounds of the build it was compiled with and, when given, another build's
 * dist folder (`node dist/bench/batch-plan-micro.js [/other/dist]`), and prints µs per batch of
 * each round (process CPU, user + system) as one JSON line.
 */

type Side = { label: string; plan: typeof BatchPlanModule; cache: typeof StateCacheModule };

const load = (dist: string, label: string): Side => ({
  label,
  /* eslint-disable @typescript-eslint/no-require-imports */
  plan: require(join(dist, 'libs/core/src/batch-plan')) as typeof BatchPlanModule,
  cache: require(join(dist, 'libs/core/src/mailbox-state-cache')) as typeof StateCacheModule,
  /* eslint-enable @typescript-eslint/no-require-imports */
});

const MAILBOXES = 2_000;
const PER_ENVELOPE = 50;
const JOBS = Number(process.env.ROOST_BENCH_JOBS ?? 2);
const BATCHES = Number(process.env.ROOST_BENCH_BATCHES ?? 20_000);
const ROUNDS = Number(process.env.ROOST_BENCH_ROUNDS ?? 5);

function jobs(batch: number): AcceptJob[] {
  return Array.from({ length: JOBS }, (_, j) => {
    const group = (batch * JOBS + j) % (MAILBOXES / PER_ENVELOPE);
    const id = `01JV3Z8W7Q4M2N6P8R${String(batch).padStart(6, '0')}${j}X`;
    const recipients = Array.from({ length: PER_ENVELOPE }, (_, i) => {
      const agentId = group * PER_ENVELOPE + i + 1;
      return { agentId, handle: `@bench.agent${agentId}`, kind: 'to' as const, lastSeq: 0, lastCreatedAt: 0 };
    });
    const stored = {
      id,
      from: '@bench.sender',
      to: recipients.map((r) => r.handle),
      date_ms: 1_764_000_000_000,
      content_parts: [{ type: 'text', text: 'x'.repeat(900) }],
    } as unknown as AcceptJob['stored'];
    return {
      envelopeId: id,
      senderId: 1,
      recipients,
      stored,
      body: JSON.stringify(stored),
      derived: { type_hint: 'text', size_hint: 900 },
      extensions: {},
      selfAddressed: false,
      searchText: 'x'.repeat(900),
      fileIds: [],
    };
  });
}

function round(side: Side, batches: AcceptJob[][]): number {
  const { plan } = side;
  let now = 1_764_000_000_000;
  const cache = new side.cache.MailboxStateCache(() => now);
  const before = process.cpuUsage();
  for (const batch of batches) {
    now += 1;
    const mailboxIds = plan.mailboxesOf(batch);
    const known = cache.statesOf(mailboxIds, plan.lookedUpStates(batch));
    if (known === undefined) throw new Error('no states');
    const planned = plan.planBatch(batch, known, now);
    if (plan.expectedSeqs(planned, known).length !== mailboxIds.length) throw new Error('bad plan');
    cache.settle(mailboxIds, 'written', planned.states);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / batches.length;
}

function main(): void {
  const sides = [load(join(__dirname, '..'), 'this')];
  if (process.argv[2]) sides.push(load(process.argv[2], 'other'));
  const batches = Array.from({ length: BATCHES }, (_, b) => jobs(b));
  for (const side of sides) round(side, batches.slice(0, 2_000)); // warm-up
  const us: Record<string, number[]> = Object.fromEntries(sides.map((side) => [side.label, []]));
  for (let r = 0; r < ROUNDS; r++)
    for (const side of sides) us[side.label].push(Math.round(round(side, batches) * 10) / 10);
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(
    JSON.stringify({
      scenario: 'batch-plan-micro',
      jobs_per_batch: JOBS,
      recipients_per_job: PER_ENVELOPE,
      batches_per_round: BATCHES,
      us_per_batch: us,
      median_us_per_batch: Object.fromEntries(Object.entries(us).map(([label, values]) => [label, median(values)])),
    }),
  );
}

main();
