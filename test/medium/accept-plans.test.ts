import { sql } from 'kysely';
import { EnvelopesRepository } from '#db';
import { ulid } from '#domain';
import { postgresAndPglite } from '../support/postgres-and-pglite';

/**
 * How Postgres plans the accept path's statements when an operator is not under load: every send
 * commits alone, one envelope per statement. Each of its `unnest`s takes one array through a
 * subquery, so the custom plan's row estimate is the generic plan's and the generic plan, made once
 * per connection, is kept (plan_cache_mode auto: five custom plans, then the generic one); and the
 * entries' parent check (migration 0010) runs its queries with generic plans. Before, both were
 * planned again at every send. On Postgres and on PGlite (the embedded default).
 */

const database = postgresAndPglite('roost_accept_plans', { statementTimeoutMs: 10_000, migrated: true });

describe.each(['postgres', 'pglite'] as const)('accept statement plans on %s', (kind) => {
  test('one envelope per statement: five custom plans, then the generic plan every time', async () => {
    const db = database(kind);
    const now = Date.now();
    const agents = await sql<{ id: string; handle: string }>`
      insert into agents (handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
      select h, 'test', md5(h), 'open', h, 'public', ${now}, ${now} from unnest(${['@plans.from', '@plans.to']}::text[]) as h
      returning id, handle`.execute(db.db);
    const id = (handle: string) => Number(agents.rows.find((row) => row.handle === handle)!.id);
    await sql`insert into mailboxes (agent_id) values (${id('@plans.from')}), (${id('@plans.to')})`.execute(db.db);
    const repo = new EnvelopesRepository(db);
    const sends = 9;
    for (let seq = 1; seq <= sends; seq++) {
      const envelopeId = ulid();
      const createdAt = now + seq;
      const body = JSON.stringify({ id: envelopeId, to: ['@plans.to'], content_parts: [{ type: 'text', text: 'hi' }] });
      const outcome = await repo.insertAllIfCurrent(
        [
          {
            id: envelopeId,
            sender_id: id('@plans.from'),
            created_at: createdAt,
            received_ms: createdAt,
            body,
            header: JSON.stringify({ id: envelopeId, from: '@plans.from', to: ['@plans.to'], created_at: createdAt }),
            recipients: ['@plans.to'],
            self_addressed: false,
            search_text: `send ${seq}`,
            receipt_for: null,
            receipt_status: null,
            guard_override: null,
          },
        ],
        [{ mailbox_id: id('@plans.to'), seq, envelope_id: envelopeId, created_at: createdAt, kind: 'to' }],
        [{ agent_id: id('@plans.to'), last_seq: seq, last_created_at: createdAt }],
        [seq - 1],
      );
      expect(outcome).toBe('written');
    }
    const plans = await sql<{ generic_plans: string | number; custom_plans: string | number }>`
      select generic_plans, custom_plans from pg_prepared_statements where name = 'roost_accept_if_current'`.execute(
      db.db,
    );
    expect(plans.rows.map((row) => [Number(row.custom_plans), Number(row.generic_plans)])).toEqual([[5, sends - 5]]);
    // Every send landed, in order.
    const entries = await sql<{ seq: string | number }>`
      select seq from mailbox_entries where mailbox_id = ${id('@plans.to')} order by seq`.execute(db.db);
    expect(entries.rows.map((row) => Number(row.seq))).toEqual(Array.from({ length: sends }, (_, i) => i + 1));
  });

  test("the entries' parent check plans its queries generically (migration 0010)", async () => {
    const config = await sql<{ proconfig: string[] }>`
      select proconfig from pg_proc where proname = 'roost_entries_check_parents'`.execute(database(kind).db);
    expect(config.rows).toHaveLength(1);
    expect([...config.rows[0].proconfig].sort()).toEqual(['enable_seqscan=off', 'plan_cache_mode=force_generic_plan']);
  });
});
