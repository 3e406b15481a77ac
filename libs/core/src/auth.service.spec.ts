import { loadConfig } from '#config';
import type { AgentsRepository, OrgsRepository, SendersAndRecipients } from '#db';
import { hashToken, type Agent } from '#domain';
import { Metrics } from '#metrics';
import {
  AuthService,
  KEPT_ENTRY_MAX_CHARS,
  KEPT_LOOKUPS_MAX,
  KEPT_PAUSE_MS,
  KEPT_RECIPIENT_CHARS,
} from './auth.service';

const agent = (id: number, handle: string): Agent => ({
  id,
  handle,
  policy: 'open',
  allowlist: [],
  display_name: handle,
  description: null,
  card_body: null,
  visibility: 'public',
  content_guard: null,
  retention_days: null,
  created_at: 0,
  updated_at: 0,
});

/** An agents repository over fixed agents, counting lookups, at a policy epoch the test moves. */
function repository() {
  const state = { epoch: 7, lookups: 0, blocked: false, tokens: new Map<string, Agent>() };
  const bob = { ...agent(2, '@t.bob'), last_seq: 5, last_created_at: 50 };
  const carol = { ...agent(3, '@t.carol'), last_seq: 1, last_created_at: 10 };
  const repo = {
    findSendersAndRecipients: async (hashes: string[], handles: string[]): Promise<SendersAndRecipients> => {
      state.lookups++;
      const senders = new Map<string, { agent: Agent; blockedBy: string[] }>();
      for (const hash of hashes) {
        const found = state.tokens.get(hash);
        if (found) senders.set(hash, { agent: found, blockedBy: state.blocked ? ['@t.bob'] : [] });
      }
      const recipients = new Map([bob, carol].filter((r) => handles.includes(r.handle)).map((r) => [r.handle, r]));
      // Any `@t.x<n>` exists too (for the count bound).
      for (const handle of handles.filter((h) => h.startsWith('@t.x')))
        recipients.set(handle, { ...agent(1000 + Number(handle.slice(4)), handle), last_seq: 0, last_created_at: 0 });
      return { senders, recipients, policyEpoch: state.epoch };
    },
  };
  state.tokens.set(hashToken('alice-token'), agent(1, '@t.alice'));
  return { state, repo: repo as unknown as AgentsRepository };
}

function service(repo: AgentsRepository, env: Record<string, string> = {}) {
  const config = loadConfig({
    DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/unused',
    ROOST_ADMIN_TOKEN: 'admin-token-for-the-spec',
    ...env,
  });
  const metrics = new Metrics();
  return { auth: new AuthService(repo, {} as OrgsRepository, config, metrics), metrics };
}

const kept = async (metrics: Metrics) => (await metrics.keptSenderLookups.get()).values[0]?.value ?? 0;

describe('AuthService kept sender lookups', () => {
  it("keeps a send's lookup for the same token and recipients, with its policy epoch and without mailbox states", async () => {
    const { state, repo } = repository();
    const { auth, metrics } = service(repo);
    const first = await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    expect(first.recipients).toMatchObject({ policyEpoch: 7 });
    expect(first.recipients.kept).toBeUndefined();
    expect(first.recipients.agents.get('@t.bob')).toMatchObject({ last_seq: 5 }); // fresh: the state read
    const second = await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    expect(state.lookups).toBe(1);
    expect(second.agent.handle).toBe('@t.alice');
    expect(second.recipients).toMatchObject({ policyEpoch: 7, kept: true });
    const bob = second.recipients.agents.get('@t.bob');
    expect(bob).toMatchObject({ id: 2, handle: '@t.bob', policy: 'open', allowlist: [] });
    expect(bob).not.toHaveProperty('last_seq');
    expect(bob).not.toHaveProperty('last_created_at');
    expect(await kept(metrics)).toBe(1);
    // Other recipients are another lookup; the same in another order the same one.
    await auth.senderFromHeader('Bearer alice-token', ['@t.bob', '@t.carol']);
    expect((await auth.senderFromHeader('Bearer alice-token', ['@t.carol', '@t.bob'])).recipients.kept).toBe(true);
    expect(state.lookups).toBe(2);
    // Routes that name no recipients never use or keep one.
    await auth.senderFromHeader('Bearer alice-token', []);
    await auth.senderFromHeader('Bearer alice-token', []);
    expect(state.lookups).toBe(4);
  });

  it('keeps only the named recipients of a shared lookup query, and the blocks among them', async () => {
    const { state, repo } = repository();
    state.blocked = true;
    const { auth } = service(repo);
    // Two requests in one turn share one query that loads both recipients.
    await Promise.all([
      auth.senderFromHeader('Bearer alice-token', ['@t.carol']),
      auth.senderFromHeader('Bearer alice-token', ['@t.bob']),
    ]);
    const again = await auth.senderFromHeader('Bearer alice-token', ['@t.carol']);
    expect(again.recipients.kept).toBe(true);
    expect([...again.recipients.agents.keys()]).toEqual(['@t.carol']);
    expect(again.recipients.blockedBy).toEqual([]);
    const bob = await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    expect(bob.recipients.blockedBy).toEqual(['@t.bob']);
  });

  it('a lookup read at a newer epoch retires every kept lookup older than it', async () => {
    const { state, repo } = repository();
    const { auth } = service(repo);
    await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    state.epoch = 8; // a policy changed somewhere; another send's fresh lookup reads the new epoch
    await auth.senderFromHeader('Bearer alice-token', ['@t.carol']);
    const after = await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    expect(after.recipients.kept).toBeUndefined();
    expect(after.recipients.policyEpoch).toBe(8);
    expect(state.lookups).toBe(3);
  });

  it('reload reads afresh: a token revoked since answers 401 though its lookup was kept', async () => {
    const { state, repo } = repository();
    const { auth } = service(repo);
    await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    const kept = await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    state.tokens.clear();
    state.epoch = 8;
    await expect(kept.recipients.reload!()).rejects.toMatchObject({ status: 401 });
    await expect(auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).rejects.toMatchObject({ status: 401 });
  });

  it(`a commit that found the epoch moved pauses kept lookups for ${KEPT_PAUSE_MS} ms`, async () => {
    const now = jest.spyOn(Date, 'now');
    try {
      now.mockReturnValue(5_000_000);
      const { state, repo } = repository();
      const { auth } = service(repo);
      await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
      const kept = await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
      await kept.recipients.reload!(); // a refusal decided again: no pause
      expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBe(true);
      await kept.recipients.reload!(true);
      now.mockReturnValue(5_000_000 + KEPT_PAUSE_MS - 1);
      expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBeUndefined();
      now.mockReturnValue(5_000_000 + KEPT_PAUSE_MS);
      expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBe(true);
      expect(state.lookups).toBe(4);
    } finally {
      now.mockRestore();
    }
  });

  it('keeps a lookup for ROOST_ACCEPT_KEEP_LOOKUPS_MS, and none at 0', async () => {
    const now = jest.spyOn(Date, 'now');
    try {
      now.mockReturnValue(1_000_000);
      const { state, repo } = repository();
      const { auth } = service(repo, { ROOST_ACCEPT_KEEP_LOOKUPS_MS: '1000' });
      await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
      now.mockReturnValue(1_000_999);
      expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBe(true);
      now.mockReturnValue(1_001_000);
      expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBeUndefined();
      expect(state.lookups).toBe(2);

      const off = repository();
      const { auth: never } = service(off.repo, { ROOST_ACCEPT_KEEP_LOOKUPS_MS: '0' });
      for (let i = 0; i < 3; i++) await never.senderFromHeader('Bearer alice-token', ['@t.bob']);
      expect(off.state.lookups).toBe(3);
    } finally {
      now.mockRestore();
    }
  });

  it(`does not keep a lookup whose text passes ${KEPT_ENTRY_MAX_CHARS} characters, nor one naming an unknown handle`, async () => {
    const { state, repo } = repository();
    state.tokens.set(hashToken('alice-token'), {
      ...agent(1, '@t.alice'),
      description: 'd'.repeat(48),
      card_body: 'c'.repeat(KEPT_ENTRY_MAX_CHARS - 48 - KEPT_RECIPIENT_CHARS - '@t.bob'.length + 1),
    });
    const { auth } = service(repo);
    await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBeUndefined();
    expect(state.lookups).toBe(2);
    state.tokens.set(hashToken('alice-token'), {
      ...agent(1, '@t.alice'),
      card_body: 'c'.repeat(KEPT_ENTRY_MAX_CHARS - KEPT_RECIPIENT_CHARS - '@t.bob'.length),
    });
    await auth.senderFromHeader('Bearer alice-token', ['@t.bob']);
    expect((await auth.senderFromHeader('Bearer alice-token', ['@t.bob'])).recipients.kept).toBe(true);
    await auth.senderFromHeader('Bearer alice-token', ['@t.bob', '@t.nobody']);
    expect(
      (await auth.senderFromHeader('Bearer alice-token', ['@t.bob', '@t.nobody'])).recipients.kept,
    ).toBeUndefined();
  });

  it('does not keep a lookup of more recipients than its size allows', async () => {
    const { state, repo } = repository();
    const { auth } = service(repo);
    const many = Array.from({ length: 16 }, (_, i) => `@t.x${i}`);
    await auth.senderFromHeader('Bearer alice-token', many);
    expect((await auth.senderFromHeader('Bearer alice-token', many)).recipients.kept).toBeUndefined();
    await auth.senderFromHeader('Bearer alice-token', many.slice(0, 15));
    expect((await auth.senderFromHeader('Bearer alice-token', many.slice(0, 15))).recipients.kept).toBe(true);
    expect(state.lookups).toBe(3);
  });

  it(`keeps at most ${KEPT_LOOKUPS_MAX} lookups, dropping the oldest`, async () => {
    const { state, repo } = repository();
    const { auth } = service(repo);
    const handles = (i: number) => ['@t.bob', `@t.x${i}`];
    for (let i = 0; i <= KEPT_LOOKUPS_MAX; i++) await auth.senderFromHeader('Bearer alice-token', handles(i));
    const lookups = state.lookups;
    expect((await auth.senderFromHeader('Bearer alice-token', handles(KEPT_LOOKUPS_MAX))).recipients.kept).toBe(true);
    expect((await auth.senderFromHeader('Bearer alice-token', handles(0))).recipients.kept).toBeUndefined();
    expect(state.lookups).toBe(lookups + 1);
  });
});
