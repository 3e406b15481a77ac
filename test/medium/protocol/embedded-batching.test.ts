import { envelope, startOperator, type TestOperator } from '../../support/operator';

/** The value of an unlabelled metric in a Prometheus text exposition. */
function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

/**
 * Embedded PGlite runs every statement on the event loop over one session: concurrent accepts
 * must share sender lookups and commits (a statement per envelope made it 20× slower), and still
 * each get their own gapless seq.
 */
describe('embedded accept batching (PGlite)', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await startOperator({ backend: 'pglite' });
  });
  afterAll(async () => op?.close());

  it('concurrent accepts share lookups and commits, each 202 durable with a gapless seq', async () => {
    const SENDERS = 16;
    const inbox = await op.agent('@batch.inbox');
    const tokens = await Promise.all(Array.from({ length: SENDERS }, (_, i) => op.agent(`@batch.s${i}`)));
    const before = (await op.client.get('/metrics')).text;

    const replies = await Promise.all(tokens.map((token) => op.client.post('/messages', envelope('@batch.inbox'), token)));
    expect(replies.map((reply) => reply.status)).toEqual(tokens.map(() => 202));

    const after = (await op.client.get('/metrics')).text;
    const batches = metric(after, 'roost_accept_batch_envelopes_count') - metric(before, 'roost_accept_batch_envelopes_count');
    const envelopes = metric(after, 'roost_accept_batch_envelopes_sum') - metric(before, 'roost_accept_batch_envelopes_sum');
    const statements = metric(after, 'roost_db_query_duration_seconds_count') - metric(before, 'roost_db_query_duration_seconds_count');
    expect(envelopes).toBe(SENDERS);
    expect(batches).toBeLessThan(SENDERS);
    // One lookup and one commit per envelope would be 2 × SENDERS statements.
    expect(statements).toBeLessThan(SENDERS);

    const mailbox = await op.client.get('/mailbox?limit=1000', inbox);
    expect(mailbox.status).toBe(200);
    const seqs = (mailbox.body.envelope_headers as Array<{ seq: number }>).map((h) => h.seq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: SENDERS }, (_, i) => i + 1));
  });
});
