import { envelope, startOperator, type TestOperator } from '../../support/operator';

/** The value of an unlabelled metric in a Prometheus text exposition. */
function metric(text: string, name: string): number {
  // A labelled series is named with its labels, e.g. `roost_db_syncs_total{kind="wal"}`.
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

/**
 * Embedded PGlite runs every statement on the event loop over one session: concurrent accepts
 * must share sender lookups and commits (a statement per envelope made it 20× slower), and each
 * accepted envelope is still in the mailbox exactly once.
 */
describe('embedded accept batching (PGlite)', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await startOperator({ backend: 'pglite' });
  });
  afterAll(async () => op?.close());

  it('concurrent accepts share lookups and commits, each 202 stored exactly once', async () => {
    const SENDERS = 16;
    const inbox = await op.agent('@batch.inbox');
    const tokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => op.agent(`@batch.s${i}`)));
    const before = (await op.client.get('/metrics')).text;

    const bodies = tokens.map(() => envelope('@batch.inbox'));
    const replies = await Promise.all(tokens.map((token, i) => op.client.post('/messages', bodies[i], token)));
    expect(replies.map((reply) => reply.status)).toEqual(tokens.map(() => 202));

    const after = (await op.client.get('/metrics')).text;
    const batches =
      metric(after, 'roost_accept_batch_envelopes_count') - metric(before, 'roost_accept_batch_envelopes_count');
    const envelopes =
      metric(after, 'roost_accept_batch_envelopes_sum') - metric(before, 'roost_accept_batch_envelopes_sum');
    const statements =
      metric(after, 'roost_db_query_duration_seconds_count') - metric(before, 'roost_db_query_duration_seconds_count');
    expect(envelopes).toBe(SENDERS);
    expect(batches).toBeLessThan(SENDERS);
    // One lookup and one commit per envelope would be 2 × SENDERS statements.
    expect(statements).toBeLessThan(SENDERS);
    // Each 202 follows a commit synced to disk: at least one WAL sync per batch, and no more than
    // one per statement (a sync per envelope would defeat the batching).
    const walSyncs =
      metric(after, 'roost_db_syncs_total{kind="wal"}') - metric(before, 'roost_db_syncs_total{kind="wal"}');
    expect(walSyncs).toBeGreaterThanOrEqual(batches);
    expect(walSyncs).toBeLessThanOrEqual(statements);

    const mailbox = await op.client.get('/mailbox?limit=1000', inbox);
    expect(mailbox.status).toBe(200);
    const ids = (mailbox.body.envelope_headers as Array<{ id: string }>).map((h) => h.id).sort();
    expect(ids).toEqual(bodies.map((body) => body.id as string).sort());
  });
});
