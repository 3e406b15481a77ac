import type { MailboxState } from '#db';
import { allocateEntries, expectedSeqs, mailboxesOf, planBatch, stampBatch, type AcceptJob } from './batch-plan';

function job(id: string, mailboxes: number[], extra: Partial<AcceptJob> = {}): AcceptJob {
  return {
    envelopeId: id,
    senderId: 99,
    recipients: mailboxes.map((agentId, i) => ({ agentId, handle: `@m.n${agentId}`, kind: i === 0 ? 'to' : 'cc' })),
    stored: { id, from: '@m.sender', to: [`@m.n${mailboxes[0]}`], date_ms: 5 } as unknown as AcceptJob['stored'],
    body: `{"id":"${id}"}`,
    derived: { type_hint: 'text', size_hint: 1 },
    extensions: {},
    selfAddressed: false,
    searchText: id,
    fileIds: [],
    ...extra,
  };
}

const state = (agent_id: number, last_seq: number, last_created_at: number): MailboxState => ({
  agent_id,
  last_seq,
  last_created_at,
});

describe('batch plan', () => {
  it('stamps created_at at the clock, above each mailbox last one and above earlier jobs of the batch', () => {
    const locked = [state(1, 7, 500), state(2, 3, 1_200)];
    const stamped = stampBatch([job('A', [1]), job('B', [1]), job('C', [2]), job('D', [1, 2])], locked, 1_000);
    expect(stamped.createdAts).toEqual([1_000, 1_001, 1_201, 1_202]);
    expect(JSON.parse(stamped.headers[2])).toMatchObject({ op: 'envelope.notify', id: 'C', created_at: 1_201 });
    expect(stamped.envelopes[3]).toMatchObject({
      id: 'D',
      created_at: 1_202,
      received_ms: 1_000,
      recipients: ['@m.n1', '@m.n2'],
      header: stamped.headers[3],
    });
  });

  it('carries the receipt and guard override into the envelope row', () => {
    const receipt = job('R', [1], { receipt: { envelope_id: 'X', status: 'read' }, guardOverride: ['secret'] });
    const [row] = stampBatch([receipt], [state(1, 0, 0)], 10).envelopes;
    expect(row).toMatchObject({ receipt_for: 'X', receipt_status: 'read', guard_override: ['secret'] });
    expect(stampBatch([job('P', [1])], [state(1, 0, 0)], 10).envelopes[0]).toMatchObject({
      receipt_for: null,
      receipt_status: null,
      guard_override: null,
    });
  });

  it('allocates the next seq of each recipient mailbox in job order and reports each advanced state once', () => {
    const locked = [state(1, 7, 500), state(2, 3, 600)];
    const plan = planBatch([job('A', [1, 2]), job('B', [2])], locked, 1_000);
    expect(plan.entries).toEqual([
      { mailbox_id: 1, seq: 8, envelope_id: 'A', created_at: 1_000, kind: 'to' },
      { mailbox_id: 2, seq: 4, envelope_id: 'A', created_at: 1_000, kind: 'cc' },
      { mailbox_id: 2, seq: 5, envelope_id: 'B', created_at: 1_001, kind: 'to' },
    ]);
    expect(plan.outcomes).toEqual([
      {
        kind: 'stored',
        createdAt: 1_000,
        receivedMs: 1_000,
        header: plan.headers[0],
        entries: [
          { mailboxId: 1, seq: 8 },
          { mailboxId: 2, seq: 4 },
        ],
      },
      {
        kind: 'stored',
        createdAt: 1_001,
        receivedMs: 1_000,
        header: plan.headers[1],
        entries: [{ mailboxId: 2, seq: 5 }],
      },
    ]);
    expect(plan.states).toEqual([state(1, 8, 1_000), state(2, 5, 1_001)]);
    expect(locked).toEqual([state(1, 7, 500), state(2, 3, 600)]); // the caller's states are not mutated
  });

  it('gives an id already taken `exists` and advances nothing for it', () => {
    const jobs = [job('A', [1]), job('B', [1, 2]), job('C', [1])];
    const locked = [state(1, 0, 0), state(2, 0, 0)];
    const stamped = stampBatch(jobs, locked, 100);
    const plan = allocateEntries(jobs, stamped, locked, 100, (j) => j.envelopeId !== 'B');
    expect(plan.outcomes.map((o) => o.kind)).toEqual(['stored', 'exists', 'stored']);
    expect(plan.entries.map((e) => [e.envelope_id, e.mailbox_id, e.seq])).toEqual([
      ['A', 1, 1],
      ['C', 1, 2],
    ]);
    expect(plan.states).toEqual([state(1, 2, 102)]); // mailbox 2 is not advanced at all
  });

  it('the compare of compare-and-set is each advanced mailbox last_seq as known, in plan order', () => {
    const known = [state(2, 40, 0), state(1, 9, 0), state(3, 1, 0)];
    const plan = planBatch([job('A', [1]), job('B', [2])], known, 1);
    expect(plan.states.map((s) => s.agent_id)).toEqual([1, 2]);
    expect(expectedSeqs(plan, known)).toEqual([9, 40]);
  });

  it('the compare in the lock-free order (known as the jobs name them) and with an id taken in between', () => {
    const jobs = [job('A', [3, 1]), job('B', [1, 2]), job('C', [4])];
    const known = [state(3, 30, 0), state(1, 10, 0), state(2, 20, 0), state(4, 40, 0)];
    const plan = planBatch(jobs, known, 1);
    expect(plan.states.map((s) => [s.agent_id, s.last_seq])).toEqual([
      [3, 31],
      [1, 12],
      [2, 21],
      [4, 41],
    ]);
    expect(expectedSeqs(plan, known)).toEqual([30, 10, 20, 40]);
    const skipped = allocateEntries(jobs, stampBatch(jobs, known, 1), known, 1, (j) => j.envelopeId !== 'A');
    expect(skipped.states.map((s) => s.agent_id)).toEqual([1, 2, 4]);
    expect(expectedSeqs(skipped, known)).toEqual([10, 20, 40]);
  });

  it('refuses a recipient whose mailbox state is not among those given', () => {
    expect(() => planBatch([job('A', [1, 2])], [state(1, 0, 0)], 1)).toThrow('mailbox 2');
  });

  it('lists each recipient mailbox once', () => {
    expect(mailboxesOf([job('A', [3, 1]), job('B', [1, 2])])).toEqual([3, 1, 2]);
  });
});
