import { envelope, startOperator, type TestOperator } from '../../support/operator';

describe('operator smoke', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  it('accepts an envelope and lists it in the recipient mailbox', async () => {
    const alice = await op.agent('@smoke.alice');
    const bob = await op.agent('@smoke.bob');
    const sent = await op.client.post('/messages', envelope('@smoke.bob'), alice);
    expect(sent.status).toBe(202);
    const listed = await op.client.get('/mailbox', bob);
    expect(listed.body.envelope_headers.map((h: { id: string }) => h.id)).toEqual([sent.body.id]);
  });
});
