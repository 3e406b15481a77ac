import {
  admits,
  allowlistCovers,
  isAllowlistEntry,
  isHandle,
  isMonitorHandle,
  isOrgName,
  isVisibleTo,
  localNameOf,
  mayDeliver,
  ownerGlobOf,
  ownerOf,
  type InboundPolicy,
  type PolicySubject,
} from './handles';

const agent = (handle: string, policy: InboundPolicy, allowlist: string[] = []): PolicySubject => ({
  handle,
  policy,
  allowlist,
});

describe('handle grammar (ASMTP §1.1)', () => {
  it.each(['@alice.cli', '@a.b', '@acme_co.bot-1', '@0.9', '@-._'])('accepts %s', (value) => {
    expect(isHandle(value)).toBe(true);
  });

  it.each([
    ['@Bad.x', 'upper case is invalid, not folded'],
    ['@a', 'no dot'],
    ['a.b', 'no leading @'],
    ['@a.b.c', 'more than one dot'],
    ['@.b', 'empty owner'],
    ['@a.', 'empty name'],
    ['@a.*', 'an owner glob is not a handle'],
    ['@a.b ', 'trailing space'],
    [' @a.b', 'leading space'],
    ['@a.b\n', 'trailing newline'],
    ['@al ice.b', 'inner space'],
    ['@alicé.b', 'non-ASCII letter'],
    ['', 'empty string'],
  ])('rejects %j (%s)', (value) => {
    expect(isHandle(value)).toBe(false);
  });

  it.each([null, undefined, 5, ['@a.b'], { handle: '@a.b' }])('rejects the non-string %j', (value) => {
    expect(isHandle(value)).toBe(false);
  });

  it('has no maximum length', () => {
    expect(isHandle(`@${'a'.repeat(500)}.${'b'.repeat(500)}`)).toBe(true);
  });
});

describe('allowlist entry grammar (ASMTP §1.1)', () => {
  it.each(['@acme.bot', '@acme.*'])('accepts %s', (value) => {
    expect(isAllowlistEntry(value)).toBe(true);
  });

  it.each(['@Bad.x', '@a', 'a.b', '@a.b.c', '@*.*', '@acme.b*', '@acme.**', '*', '@acme.*.x', ''])(
    'rejects %j',
    (value) => {
      expect(isAllowlistEntry(value)).toBe(false);
    },
  );

  it('rejects non-strings', () => {
    expect(isAllowlistEntry(undefined)).toBe(false);
    expect(isAllowlistEntry(7)).toBe(false);
  });
});

describe('monitor handle grammar (ASMTP §1.1)', () => {
  it.each(['mon_x', 'mon_ABC-def_09', `mon_${'a'.repeat(64)}`])('accepts %s', (value) => {
    expect(isMonitorHandle(value)).toBe(true);
  });

  it.each(['x', 'mon_', 'MON_x', 'mon-x', 'mon_a.b', `mon_${'a'.repeat(65)}`, ' mon_x'])('rejects %j', (value) => {
    expect(isMonitorHandle(value)).toBe(false);
  });

  it('rejects non-strings', () => {
    expect(isMonitorHandle(5)).toBe(false);
    expect(isMonitorHandle(null)).toBe(false);
  });
});

describe('org name grammar', () => {
  it('accepts the owner part of a handle and nothing with dots, @ or upper case', () => {
    expect(isOrgName('acme_co-1')).toBe(true);
    expect(isOrgName('Acme')).toBe(false);
    expect(isOrgName('@acme')).toBe(false);
    expect(isOrgName('a.b')).toBe(false);
    expect(isOrgName('')).toBe(false);
  });
});

describe('owner and local name of a handle', () => {
  it('ownerOf keeps the part between @ and the dot', () => {
    expect(ownerOf('@acme.bot')).toBe('acme');
  });

  it('localNameOf keeps the part after the dot', () => {
    expect(localNameOf('@acme.bot')).toBe('bot');
  });

  it('ownerGlobOf derives @<owner>.*', () => {
    expect(ownerGlobOf('@acme.bot')).toBe('@acme.*');
    expect(ownerGlobOf('@a-b_c.x')).toBe('@a-b_c.*');
  });
});

describe('allowlistCovers', () => {
  it('covers the exact handle', () => {
    expect(allowlistCovers(['@acme.bot'], '@acme.bot')).toBe(true);
  });

  it("covers a handle through its owner's glob", () => {
    expect(allowlistCovers(['@acme.*'], '@acme.bot')).toBe(true);
  });

  it('does not cover another agent of the same owner by exact entry', () => {
    expect(allowlistCovers(['@acme.bot'], '@acme.other')).toBe(false);
  });

  it("does not cover through another owner's glob, nor by prefix", () => {
    expect(allowlistCovers(['@acm.*', '@acme2.*', '@acme.bo'], '@acme.bot')).toBe(false);
  });

  it('is case-sensitive and does no normalisation', () => {
    expect(allowlistCovers(['@ACME.*', '@Acme.bot'], '@acme.bot')).toBe(false);
  });

  it('an empty allowlist covers nobody', () => {
    expect(allowlistCovers([], '@acme.bot')).toBe(false);
  });
});

describe('admits(target, sender) (ASMTP §1.5)', () => {
  it('an open target admits anyone, even with an empty allowlist', () => {
    expect(admits(agent('@r.x', 'open'), '@s.y')).toBe(true);
  });

  it('an allowlist target admits a sender it lists exactly', () => {
    expect(admits(agent('@r.x', 'allowlist', ['@s.y']), '@s.y')).toBe(true);
  });

  it("an allowlist target admits a sender through the sender's owner glob", () => {
    expect(admits(agent('@r.x', 'allowlist', ['@s.*']), '@s.y')).toBe(true);
  });

  it('an allowlist target refuses a sender it does not list', () => {
    expect(admits(agent('@r.x', 'allowlist', ['@other.y', '@t.*']), '@s.y')).toBe(false);
  });
});

describe('mayDeliver: the symmetric policy table (ASMTP §1.5)', () => {
  const S = '@s.one';
  const R = '@r.one';

  // [S policy, R policy, S allowlist covers R, R allowlist covers S, permitted]
  it.each<[InboundPolicy, InboundPolicy, boolean, boolean, boolean]>([
    ['open', 'open', false, false, true],
    ['open', 'allowlist', false, true, true],
    ['open', 'allowlist', true, false, false],
    ['allowlist', 'open', true, false, true],
    ['allowlist', 'open', false, true, false],
    ['allowlist', 'allowlist', true, true, true],
    ['allowlist', 'allowlist', true, false, false],
    ['allowlist', 'allowlist', false, true, false],
    ['allowlist', 'allowlist', false, false, false],
  ])('S %s, R %s, S lists R %s, R lists S %s → %s', (sPolicy, rPolicy, sListsR, rListsS, permitted) => {
    const sender = agent(S, sPolicy, sListsR ? [R] : []);
    const recipient = agent(R, rPolicy, rListsS ? [S] : []);
    expect(mayDeliver(sender, recipient, false)).toBe(permitted);
  });

  it('owner globs satisfy both sides (conformance #31)', () => {
    const sender = agent(S, 'allowlist', ['@r.*']);
    const recipient = agent(R, 'allowlist', ['@s.*']);
    expect(mayDeliver(sender, recipient, false)).toBe(true);
  });

  it('an open policy never overrides the other side: open recipient, allowlist sender not listing it', () => {
    expect(mayDeliver(agent(S, 'allowlist', ['@x.y']), agent(R, 'open'), false)).toBe(false);
  });

  it('self-send always passes, even with policy allowlist and an empty allowlist (§1.7)', () => {
    const self = agent(S, 'allowlist', []);
    expect(mayDeliver(self, self, false)).toBe(true);
  });

  it('a recipient that blocked the sender refuses, even when both policies are open (§1.6)', () => {
    expect(mayDeliver(agent(S, 'open'), agent(R, 'open'), true)).toBe(false);
  });

  it('a recipient block refuses even when both allowlists cover each other', () => {
    expect(mayDeliver(agent(S, 'allowlist', [R]), agent(R, 'allowlist', [S]), true)).toBe(false);
  });

  it("the sender's own block of the recipient is not a gate (§9.2.4): only recipientBlocksSender counts", () => {
    // The sender blocking R is not an input at all: with R not blocking S, delivery is decided by policy only.
    expect(mayDeliver(agent(S, 'open'), agent(R, 'open'), false)).toBe(true);
  });
});

describe('isVisibleTo (ASMTP §1.8)', () => {
  const target = (visibility: 'public' | 'private', allowlist: string[] = []) => ({
    handle: '@t.one',
    visibility,
    allowlist,
  });

  it('a public agent is visible to anyone', () => {
    expect(isVisibleTo(target('public'), '@c.one')).toBe(true);
  });

  it('a private agent is visible to itself', () => {
    expect(isVisibleTo(target('private'), '@t.one')).toBe(true);
  });

  it("a private agent is visible to a caller its allowlist lists exactly or by the caller's owner glob", () => {
    expect(isVisibleTo(target('private', ['@c.one']), '@c.one')).toBe(true);
    expect(isVisibleTo(target('private', ['@c.*']), '@c.two')).toBe(true);
  });

  it('a private agent is invisible to an unlisted caller', () => {
    expect(isVisibleTo(target('private', ['@d.*', '@c.two']), '@c.one')).toBe(false);
  });

  it("is one-directional: the caller's own allowlist is not an input", () => {
    // Only the target's allowlist is consulted; a private target with an empty allowlist hides from everyone else.
    expect(isVisibleTo(target('private', []), '@c.one')).toBe(false);
  });
});
