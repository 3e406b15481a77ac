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
