import { caps } from '../caps';
import { eq, expectError, expectStatus, hasNoKey, ok } from '../assert';
import type { Agent, T } from '../runner';
import { envelope, fakeAwsKey } from '../wire';
import { idIsFree, inbox } from '../asmtp/helpers';
import { roost } from './quirks';

/** EXTENSIONS.md §4: the content guard (warn by default; block per org or agent; the sender's policy applies). */

const guardTest = (id: string, title: string, run: (t: T) => Promise<void>) =>
  roost(id, title, async (t) => {
    await t.need(caps.guard(t.run));
    await run(t);
  });

const secretText = (key: string) => `use this key for the deploy: ${key}`;

async function setGuard(t: T, agent: Agent, policy: 'off' | 'warn' | 'block'): Promise<void> {
  const reply = await t.http.patch(
    `/_admin/agents/${encodeURIComponent(agent.handle)}`,
    { content_guard: policy },
    t.adminToken,
  );
  expectStatus(reply, 200, `content_guard ${policy} for ${agent.handle}`);
  eq(reply.body.content_guard, policy, 'the agent override');
}

guardTest(
  'guard.warn',
  'warn (default): a secret is accepted with warnings [{code,part,detail}] in the 202 and flags in headers and frames; the secret is never echoed; clean content has neither key',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const socket = await t.listen(bob);
    const key = fakeAwsKey();
    const flagged = await t.send(
      alice,
      envelope(bob.handle, { subject: 'deploy', content_parts: [{ type: 'text', text: secretText(key) }] }),
    );
    expectStatus(flagged, 202);
    ok(
      Array.isArray(flagged.body.warnings) && flagged.body.warnings.length > 0,
      `the 202 carries no warnings: ${flagged.text}`,
    );
    ok(
      flagged.body.warnings.some((w: { code: string }) => w.code === 'secret'),
      `no "secret" warning: ${flagged.text}`,
    );
    ok(!flagged.text.includes(key), 'the 202 echoes the secret');
    const frame = await socket.notifyOf(flagged.body.id, t.options.frameTimeoutMs);
    ok(
      Array.isArray(frame.flags) && frame.flags.includes('secret'),
      `the frame carries no "secret" flag: ${JSON.stringify(frame)}`,
    );
    const listed = await t.http.get('/mailbox', bob.token);
    eq(listed.body.envelope_headers[0].flags, frame.flags, 'flags in the listing');
    ok(!listed.text.includes(key), 'the listing echoes the secret');
    const clean = await t.send(alice, envelope(bob.handle, { subject: 'lunch?' }));
    expectStatus(clean, 202);
    hasNoKey(clean.body, 'warnings', 'a clean 202');
    const cleanFrame = await socket.notifyOf(clean.body.id, t.options.frameTimeoutMs);
    hasNoKey(cleanFrame, 'flags', 'a clean frame');
    // The body is stored unchanged.
    eq(
      (await t.http.get(`/messages/${flagged.body.id}`, bob.token)).body.content_parts,
      [{ type: 'text', text: secretText(key) }],
      'the stored body',
    );
  },
);

guardTest(
  'guard.block',
  'block: 422 CONTENT_BLOCKED with warnings and nothing stored, unless allow_warnings covers every finding',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    await setGuard(t, alice, 'block');
    const key = fakeAwsKey();
    const body = envelope(bob.handle, { content_parts: [{ type: 'text', text: secretText(key) }] });
    const blocked = await t.send(alice, body);
    expectError(blocked, 422, 'CONTENT_BLOCKED');
    ok(
      Array.isArray(blocked.body.error.warnings) &&
        blocked.body.error.warnings.some((w: { code: string }) => w.code === 'secret'),
      `no secret warning in the 422: ${blocked.text}`,
    );
    ok(!blocked.text.includes(key), 'the 422 echoes the secret');
    eq(await inbox(t, bob), [], 'nothing stored');
    const overridden = await t.send(alice, {
      ...envelope(bob.handle, { content_parts: body.content_parts }),
      allow_warnings: ['secret'],
    });
    expectStatus(overridden, 202, 'with allow_warnings ["secret"]');
    ok(Array.isArray(overridden.body.warnings), 'an overridden send still reports its warnings');
    expectError(
      await t.send(alice, {
        ...envelope(bob.handle, { content_parts: body.content_parts }),
        allow_warnings: ['destructive'],
      }),
      422,
      'CONTENT_BLOCKED',
      'allow_warnings not covering the finding',
    );
    expectStatus(await t.send(alice, envelope(bob.handle, { subject: 'clean' })), 202, 'clean content in block mode');
    if ((await caps.schedules(t.run)) === null) {
      const scheduled = await t.http.post(
        '/schedules',
        { envelope: { to: [bob.handle], content_parts: body.content_parts }, start_at: Date.now() + 3_600_000 },
        alice.token,
      );
      expectError(scheduled, 422, 'CONTENT_BLOCKED', 'schedule creation in block mode');
    }
    ok(
      await idIsFree(t, alice, bob.handle, body.id as string),
      'the blocked envelope was stored: its id is no longer free',
    );
  },
);

guardTest(
  'guard.org-policy',
  'an organization’s content_guard applies to its agents; an agent override beats it',
  async (t) => {
    await t.need(caps.orgs(t.run));
    const name = t.owner();
    const created = await t.http.post('/_admin/orgs', { name, content_guard: 'block' }, t.adminToken);
    expectStatus(created, 201, 'POST /_admin/orgs');
    t.run.orgs.add(name);
    const member = await t.agent('member', { owner: name });
    const relaxed = await t.agent('relaxed', { owner: name });
    const bob = await t.agent('bob', { owner: t.owner('x') });
    await setGuard(t, relaxed, 'warn');
    expectError(
      await t.send(member, envelope(bob.handle, { content_parts: [{ type: 'text', text: secretText(fakeAwsKey()) }] })),
      422,
      'CONTENT_BLOCKED',
      'a member of a block-mode organization',
    );
    const warned = await t.send(
      relaxed,
      envelope(bob.handle, { content_parts: [{ type: 'text', text: secretText(fakeAwsKey()) }] }),
    );
    expectStatus(warned, 202, 'a member with a warn override');
    ok(Array.isArray(warned.body.warnings), 'the override still warns');
  },
);

guardTest(
  'guard.off-and-sender-policy',
  'the sender’s policy applies: off sends a secret without warnings; a recipient in block mode does not block a warn-mode sender',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    await setGuard(t, alice, 'off');
    await setGuard(t, carol, 'block');
    const off = await t.send(
      alice,
      envelope(bob.handle, { content_parts: [{ type: 'text', text: secretText(fakeAwsKey()) }] }),
    );
    expectStatus(off, 202, 'guard off');
    hasNoKey(off.body, 'warnings', 'guard off');
    const toBlocker = await t.send(
      bob,
      envelope(carol.handle, { content_parts: [{ type: 'text', text: secretText(fakeAwsKey()) }] }),
    );
    expectStatus(toBlocker, 202, 'a warn-mode sender to a block-mode recipient');
    ok(Array.isArray(toBlocker.body.warnings), 'the warn-mode sender gets warnings');
  },
);
