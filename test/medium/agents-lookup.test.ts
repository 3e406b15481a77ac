import { CompiledQuery, sql } from 'kysely';
import { AgentsRepository, migrate, openPglite, openPostgres, type Database } from '#db';
import { hashToken, type Agent } from '#domain';
import { createTestDatabase } from '../support/database';

/**
 * The accept path's gathered lookup (`findSendersAndRecipients`): several senders' tokens and the
 * recipients they named, in one statement. Each sender gets the full agent and exactly the named
 * recipients that blocked it; recipients carry their policy only, tombstones and unknowns absent.
 */
describe.each(['postgres', 'pglite'] as const)('the senders-and-recipients lookup on %s', (backend) => {
  let database: Database;
  let drop: (() => Promise<void>) | undefined;
  let agents: AgentsRepository;
  const made = new Map<string, Agent>();

  // Every optional column set, except on mallory (all null): the sender's columns come back as stored.
  const make = async (name: string, policy: 'open' | 'allowlist' = 'open'): Promise<Agent> => {
    const bare = name === 'mallory';
    const created = await agents.create({
      handle: `@l.${name}`,
      owner: 'l',
      token_hash: hashToken(`token-${name}`),
      policy,
      display_name: `Agent ${name} \u00e9 "quoted"`,
      description: bare ? null : `about ${name}`,
      card_body: bare ? null : `card of ${name}\n{"json": [1, 2]}`,
      visibility: bare ? 'private' : 'public',
      content_guard: bare ? null : 'block',
      retention_days: bare ? null : 7,
      created_at: 1_700_000_000_123,
    });
    if (typeof created === 'string') throw new Error(created);
    made.set(name, created);
    return created;
  };

  beforeAll(async () => {
    if (backend === 'postgres') {
      const created = await createTestDatabase('roost_lookup');
      drop = created.drop;
      database = openPostgres({ url: created.url, poolSize: 2, statementTimeoutMs: 30_000 });
    } else {
      database = await openPglite('memory://');
    }
    await migrate(database);
    agents = new AgentsRepository(database);
    for (const name of ['alice', 'mallory', 'bob', 'dave', 'gone']) await make(name);
    const carol = await make('carol', 'allowlist');
    await agents.addAllowlistEntries(carol.id, ['@l.*'], 1_000);
    made.set('carol', (await agents.findById(carol.id))!);
    await agents.addBlock(made.get('bob')!.id, '@l.mallory', 1_000);
    await agents.addBlock(made.get('carol')!.id, '@l.alice', 1_000);
    await agents.addBlock(made.get('carol')!.id, '@l.someone-else', 1_000);
    // Blocks mallory, but named by nobody: not among mallory's blockers.
    await agents.addBlock(made.get('dave')!.id, '@l.mallory', 1_000);
    await agents.addBlock(made.get('gone')!.id, '@l.mallory', 1_000);
    await agents.delete(made.get('gone')!.id, 2_000);
    // Mailbox states: advanced (bob, carol, one past 2^32), untouched (alice), and none (erin).
    await sql`update mailboxes set last_seq = 17, last_created_at = 1700000000999 where agent_id = ${made.get('bob')!.id}`.execute(
      database.db,
    );
    await sql`update mailboxes set last_seq = 4294967301, last_created_at = 1700000001000 where agent_id = ${made.get('carol')!.id}`.execute(
      database.db,
    );
    await make('erin', 'allowlist');
    await agents.addAllowlistEntries(made.get('erin')!.id, ['@l.alice', 'with "quote", comma {brace} \\slash'], 1_000);
    made.set('erin', (await agents.findById(made.get('erin')!.id))!);
    await sql`delete from mailboxes where agent_id = ${made.get('erin')!.id}`.execute(database.db);
  });
  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  it('gives each sender its full agent and the named recipients that blocked it; recipients their policy', async () => {
    const { senders, recipients } = await agents.findSendersAndRecipients(
      [hashToken('token-alice'), hashToken('token-mallory'), hashToken('token-nobody')],
      ['@l.bob', '@l.carol', '@l.gone', '@l.nobody', '@l.alice'],
    );
    expect([...senders.keys()].sort()).toEqual([hashToken('token-alice'), hashToken('token-mallory')].sort());
    expect(senders.get(hashToken('token-alice'))).toEqual({ agent: made.get('alice'), blockedBy: ['@l.carol'] });
    expect(senders.get(hashToken('token-mallory'))).toEqual({ agent: made.get('mallory'), blockedBy: ['@l.bob'] });
    // The same keys in the same order as every other read of an agent.
    expect(Object.keys(senders.get(hashToken('token-alice'))!.agent)).toEqual(Object.keys(made.get('alice')!));
    expect([...recipients.keys()].sort()).toEqual(['@l.alice', '@l.bob', '@l.carol']);
    for (const [handle, recipient] of recipients) {
      const agent = made.get(handle.slice(3))!;
      expect(recipient).toMatchObject({
        id: agent.id,
        handle: agent.handle,
        policy: agent.policy,
        allowlist: agent.allowlist,
      });
    }
    expect(recipients.get('@l.carol')).toMatchObject({ policy: 'allowlist', allowlist: ['@l.*'] });
  });

  it('returns exactly what the former row-per-recipient statement returned (states, policies, blocks, unknowns, duplicates)', async () => {
    const tokens = ['alice', 'mallory', 'nobody', 'gone', 'alice'].map((name) => hashToken(`token-${name}`));
    const handles = ['@l.bob', '@l.carol', '@l.gone', '@l.nobody', '@l.alice', '@l.erin', '@l.bob', '@l.dave', ''];
    const { senders, recipients } = await agents.findSendersAndRecipients(tokens, handles);
    const former = await database.prepared<FormerRow>(
      'roost_test_former_lookup',
      CompiledQuery.raw(FORMER_SQL, [tokens, handles]),
    );
    const formerRecipients = new Map(
      former.filter((row) => row.token_hash === null).map(({ token_hash: _, sender: __, ...row }) => [row.handle, row]),
    );
    const formerSenders = new Map(
      former
        .filter((row) => row.token_hash !== null)
        .map(({ token_hash, sender, id, handle, policy, allowlist }) => {
          const { blocked_by, ...rest } = sender!;
          return [token_hash!, { agent: { id, handle, policy, allowlist, ...rest }, blockedBy: blocked_by }];
        }),
    );
    expect(formerRecipients.size).toBe(5);
    expect(recipients).toEqual(formerRecipients);
    // Key order too (the objects travel on into the accept jobs).
    for (const [handle, recipient] of recipients)
      expect(Object.keys(recipient)).toEqual(Object.keys(formerRecipients.get(handle)!));
    expect(senders).toEqual(formerSenders);
    expect(recipients.get('@l.bob')).toMatchObject({ last_seq: 17, last_created_at: 1_700_000_000_999 });
    expect(recipients.get('@l.carol')).toMatchObject({ last_seq: 4_294_967_301, last_created_at: 1_700_000_001_000 });
    expect(recipients.get('@l.alice')).toMatchObject({ last_seq: 0, last_created_at: 0 });
    expect(recipients.get('@l.erin')).toEqual({
      id: made.get('erin')!.id,
      handle: '@l.erin',
      policy: 'allowlist',
      allowlist: made.get('erin')!.allowlist,
      last_seq: null,
      last_created_at: null,
    });
    expect(made.get('erin')!.allowlist).toEqual(['@l.alice', 'with "quote", comma {brace} \\slash']);
  });

  it('named recipients none of which exist: no recipients, the senders as before', async () => {
    const { senders, recipients } = await agents.findSendersAndRecipients(
      [hashToken('token-mallory')],
      ['@l.nobody', '@l.gone'],
    );
    expect(recipients.size).toBe(0);
    expect(senders.get(hashToken('token-mallory'))).toEqual({ agent: made.get('mallory'), blockedBy: [] });
    const none = await agents.findSendersAndRecipients([hashToken('token-nobody')], ['@l.bob']);
    expect(none.senders.size).toBe(0);
    expect([...none.recipients.keys()]).toEqual(['@l.bob']);
  });

  it('without recipients (every other route): the senders alone, blocked by nobody', async () => {
    const { senders, recipients } = await agents.findSendersAndRecipients([hashToken('token-mallory')], []);
    expect(senders.get(hashToken('token-mallory'))).toEqual({ agent: made.get('mallory'), blockedBy: [] });
    expect(recipients.size).toBe(0);
  });

  it('the fallback lookup of the accept path: policy columns and whether each blocked the sender', async () => {
    const rows = await agents.findRecipients(['@l.bob', '@l.carol', '@l.dave', '@l.gone'], '@l.mallory');
    expect(rows.sort((a, b) => a.id - b.id)).toEqual(
      ['bob', 'dave', 'carol'].map((name) => {
        const { id, handle, policy, allowlist } = made.get(name)!;
        return { id, handle, policy, allowlist, blocks_sender: name !== 'carol' };
      }),
    );
  });
});

/** A row of the former statement. */
interface FormerRow {
  token_hash: string | null;
  id: number;
  handle: string;
  policy: Agent['policy'];
  allowlist: string[];
  last_seq: number | null;
  last_created_at: number | null;
  sender: (Omit<Agent, 'id' | 'handle' | 'policy' | 'allowlist'> & { blocked_by: string[] }) | null;
}

/** The lookup as it was before the recipients were one JSON row (one row per recipient), the reference. */
const FORMER_SQL = `
  with senders as (select token_hash, "id", "handle", "policy", "allowlist", "display_name", "description", "card_body", "visibility", "content_guard", "retention_days", "created_at", "updated_at" from agents where token_hash = any($1::text[])),
  recipients as (
    select a."id", a."handle", a."policy", a."allowlist", m.last_seq, m.last_created_at from agents a
    left join lateral (select last_seq, last_created_at from mailboxes where agent_id = a.id offset 0) m on true
    where a.handle = any($2::text[]) and a.deleted_at is null),
  blocks_of_senders as materialized (
    select r.handle as blocker, b.blocked_handle from recipients r join blocks b on b.agent_id = r.id
    where b.blocked_handle in (select handle from senders))
  select token_hash, "id", "handle", "policy", "allowlist", null::bigint as last_seq, null::bigint as last_created_at,
         json_build_object('display_name', "display_name", 'description', "description", 'card_body', "card_body", 'visibility', "visibility", 'content_guard', "content_guard", 'retention_days', "retention_days", 'created_at', "created_at", 'updated_at', "updated_at",
           'blocked_by', array(select blocker from blocks_of_senders where blocked_handle = s.handle)) as sender
  from senders s
  union all
  select null, "id", "handle", "policy", "allowlist", last_seq, last_created_at, null from recipients`;
