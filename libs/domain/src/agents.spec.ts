import { adminAgentView, agentResponseOf, byteOrder, type Agent } from './agents';

const agent = (overrides: Partial<Agent> = {}): Agent => ({
  id: 7,
  handle: '@acme.bot',
  policy: 'allowlist',
  allowlist: ['@zeta.*', '@Acme.x', '@acme.a', '@acme.*'],
  display_name: 'Acme Bot',
  description: null,
  card_body: '# card',
  visibility: 'private',
  content_guard: null,
  retention_days: null,
  created_at: 1000,
  updated_at: 2000,
  ...overrides,
});

describe('byteOrder', () => {
  it('sorts by UTF-16 code unit (byte order for ASCII), upper case before lower case', () => {
    expect(['b', 'B', 'a', '*', '_'].sort(byteOrder)).toEqual(['*', 'B', '_', 'a', 'b']);
  });
});

describe('adminAgentView (ASMTP §1.4)', () => {
  it('has the reference key order without a token', () => {
    expect(Object.keys(adminAgentView(agent()))).toEqual([
      'handle',
      'policy',
      'allowlist',
      'display_name',
      'description',
      'card_body',
      'visibility',
    ]);
  });

  it('puts the token second, and only when given (create and rotate)', () => {
    const view = adminAgentView(agent(), 'tok123');
    expect(Object.keys(view).slice(0, 3)).toEqual(['handle', 'token', 'policy']);
    expect(view.token).toBe('tok123');
  });

  it('sorts the allowlist ascending in byte order without mutating the agent', () => {
    const source = agent();
    expect(adminAgentView(source).allowlist).toEqual(['@Acme.x', '@acme.*', '@acme.a', '@zeta.*']);
    expect(source.allowlist).toEqual(['@zeta.*', '@Acme.x', '@acme.a', '@acme.*']);
  });

  it('carries the stored values, null description and card_body included', () => {
    expect(adminAgentView(agent({ card_body: null }))).toEqual({
      handle: '@acme.bot',
      policy: 'allowlist',
      allowlist: ['@Acme.x', '@acme.*', '@acme.a', '@zeta.*'],
      display_name: 'Acme Bot',
      description: null,
      card_body: null,
      visibility: 'private',
    });
  });

  it('never exposes the internal id or timestamps', () => {
    const view = adminAgentView(agent(), 't');
    for (const key of ['id', 'created_at', 'updated_at']) expect(view).not.toHaveProperty(key);
  });

  it('adds the content_guard and retention_days overrides last, only when set (EXTENSIONS §5)', () => {
    const view = adminAgentView(agent({ content_guard: 'block', retention_days: 30 }));
    expect(Object.keys(view).slice(-3)).toEqual(['visibility', 'content_guard', 'retention_days']);
    expect(view).toMatchObject({ content_guard: 'block', retention_days: 30 });
  });
});

describe('agentResponseOf (ASMTP §3.7 AgentResponse)', () => {
  it('maps the stored fields and fills the fixed reference defaults', () => {
    expect(agentResponseOf(agent({ policy: 'open', visibility: 'public' }))).toEqual({
      canonical_handle: '@acme.bot',
      display_name: 'Acme Bot',
      description: null,
      card_body: '# card',
      visibility: 'public',
      inbound_policy: 'open',
      image_url: null,
      owner_image_url: null,
      skills: null,
      inactive: false,
      paused: false,
      is_online: true,
      owner_label: '@acme',
      owner_display_name: 'acme',
      owner_id: 'acme',
      namespace: 'acme',
      id: '@acme.bot',
      local_name: 'bot',
      owner_type: 'account',
      scope: 'personal',
      created_at: 1000,
      updated_at: 2000,
    });
  });

  it('never exposes the allowlist, the internal id or operator overrides', () => {
    const response = agentResponseOf(agent({ content_guard: 'warn', retention_days: 3 }));
    expect(response).not.toHaveProperty('allowlist');
    expect(response).not.toHaveProperty('content_guard');
    expect(response).not.toHaveProperty('retention_days');
    expect(response.id).toBe('@acme.bot');
  });
});
