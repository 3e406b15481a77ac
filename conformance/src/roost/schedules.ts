import { caps } from '../caps';
import { eq, expectError, expectStatus, Failure, ok } from '../assert';
import type { Agent, T } from '../runner';
import { setTimeout as sleep } from 'node:timers/promises';
import { roost } from './quirks';

/** EXTENSIONS.md §3: schedules (repeated and delayed deliveries). */

const scheduleTest = (id: string, title: string, run: (t: T) => Promise<void>) =>
  roost(id, title, async (t) => {
    await t.need(caps.schedules(t.run));
    await run(t);
  });

const message = (to: string, fields: Record<string, unknown> = {}) => ({
  to: [to],
  subject: 'standup',
  content_parts: [{ type: 'text', text: 'what did you do yesterday?' }],
  ...fields,
});

const HOUR = 3_600_000;

async function create(t: T, owner: Agent, body: Record<string, unknown>) {
  const reply = await t.http.post('/schedules', body, owner.token);
  expectStatus(reply, 201, 'POST /schedules');
  return reply.body as Record<string, any>;
}

scheduleTest(
  'schedules.create',
  'POST /schedules → 201 schedule (unset fields null); GET shows and lists it; DELETE → 200 cancelled, still readable; creating sends nothing',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const startAt = Date.now() + HOUR;
    const schedule = await create(t, alice, { envelope: message(bob.handle), start_at: startAt });
    eq(
      { ...schedule, id: 0, created_at: 0, updated_at: 0 },
      {
        id: 0,
        status: 'active',
        envelope: message(bob.handle),
        interval_ms: null,
        next_run_at: startAt,
        last_sent_at: null,
        last_envelope_id: null,
        send_count: 0,
        max_count: null,
        end_at: null,
        last_error: null,
        created_at: 0,
        updated_at: 0,
      },
      'the schedule',
    );
    eq((await t.http.get(`/schedules/${schedule.id}`, alice.token)).body, schedule, 'GET /schedules/{id}');
    const listed = await t.http.get('/schedules', alice.token);
    eq(
      listed.body.schedules.map((s: { id: string }) => s.id),
      [schedule.id],
      'GET /schedules',
    );
    const repeating = await create(t, alice, { envelope: message(bob.handle), interval_ms: HOUR, max_count: 3 });
    eq([repeating.interval_ms, repeating.max_count, repeating.end_at], [HOUR, 3, null], 'a repeating schedule');
    ok(
      repeating.next_run_at >= repeating.created_at + HOUR - 1_000,
      'a repeating schedule without start_at fires one interval after creation',
    );
    const cancelled = await t.http.delete(`/schedules/${schedule.id}`, alice.token);
    expectStatus(cancelled, 200);
    eq(cancelled.body.status, 'cancelled', 'status after DELETE');
    eq((await t.http.get(`/schedules/${schedule.id}`, alice.token)).body.status, 'cancelled', 'still readable');
    eq((await t.http.get('/mailbox', bob.token)).body.envelope_headers, [], 'nothing was sent');
  },
);

scheduleTest(
  'schedules.refused',
  'invalid schedules → 400 INVALID_SCHEDULE; the envelope is validated as if sent now (its own codes, the non-enumerating 404)',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const cases: Array<[string, Record<string, unknown>, number, string]> = [
      [
        'repeating without max_count or end_at',
        { envelope: message(bob.handle), interval_ms: HOUR },
        400,
        'INVALID_SCHEDULE',
      ],
      ['an interval of 1 ms', { envelope: message(bob.handle), interval_ms: 1, max_count: 2 }, 400, 'INVALID_SCHEDULE'],
      [
        'an envelope with an id',
        { envelope: { ...message(bob.handle), id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y' } },
        400,
        'INVALID_SCHEDULE',
      ],
      ['no envelope', { start_at: Date.now() + HOUR }, 400, 'INVALID_SCHEDULE'],
      ['an envelope without content', { envelope: message(bob.handle, { content_parts: [] }) }, 400, 'INVALID_CONTENT'],
      ['an envelope with from', { envelope: message(bob.handle, { from: alice.handle }) }, 400, 'INVALID_REQUEST'],
      ['an unknown recipient', { envelope: message(`@${t.owner()}.nobody`) }, 404, 'NOT_FOUND'],
    ];
    for (const [label, body, status, code] of cases)
      expectError(await t.http.post('/schedules', body, alice.token), status, code, label);
    eq((await t.http.get('/schedules', alice.token)).body.schedules, [], 'nothing created');
  },
);

scheduleTest(
  'schedules.fire',
  'a one-shot due now fires through the accept path: the envelope carries schedule_id in its header; the schedule completes with send_count 1 and last_envelope_id',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const socket = await t.listen(bob);
    const schedule = await create(t, alice, { envelope: message(bob.handle) });
    await socket.until(() => socket.notifies.length > 0, 20_000, 'the scheduled envelope (is a worker running?)');
    const frame = socket.notifies[0];
    eq(
      [frame.from, frame.subject, frame.schedule_id],
      [alice.handle, 'standup', schedule.id],
      'the scheduled envelope’s header',
    );
    let current: Record<string, any> = schedule;
    for (let i = 0; i < 50 && current.status !== 'completed'; i++) {
      await sleep(100);
      current = (await t.http.get(`/schedules/${schedule.id}`, alice.token)).body;
    }
    eq(
      [current.status, current.send_count, current.last_envelope_id],
      ['completed', 1, frame.id],
      'the schedule after firing',
    );
    await t.quiet();
    eq(socket.notifies.length, 1, 'envelopes sent by a one-shot');
    const listed = (await t.http.get('/mailbox', bob.token)).body.envelope_headers;
    eq(listed, [frame], 'the listing');
  },
);

scheduleTest(
  'schedules.failed',
  'a firing the accept path refuses (the recipient now blocks the owner) sets the schedule failed with last_error, and sends nothing',
  async (t) => {
    await t.need(caps.blocks(t.run));
    const { alice, bob } = await t.agents('alice', 'bob');
    const schedule = await create(t, alice, { envelope: message(bob.handle), start_at: Date.now() + 1_500 });
    expectStatus(await t.http.post('/agents/me/blocks', { handle: alice.handle }, bob.token), 201, 'bob blocks alice');
    let current: Record<string, any> = schedule;
    for (let i = 0; i < 150 && current.status === 'active'; i++) {
      await sleep(100);
      current = (await t.http.get(`/schedules/${schedule.id}`, alice.token)).body;
    }
    eq(
      [current.status, current.send_count],
      ['failed', 0],
      'the schedule after its refused firing (is a worker running?)',
    );
    ok(
      typeof current.last_error === 'string' && current.last_error.length > 0,
      `last_error ${JSON.stringify(current.last_error)}`,
    );
    eq((await t.http.get('/mailbox', bob.token)).body.envelope_headers, [], 'nothing was delivered');
  },
);

scheduleTest(
  'schedules.pause-resume-cancel',
  'PATCH {status:"paused"|"active"} pauses and resumes; a cancelled schedule cannot be resumed; another agent’s schedule is 404 on every route',
  async (t) => {
    const { alice, bob, mallory } = await t.agents('alice', 'bob', 'mallory');
    const schedule = await create(t, alice, { envelope: message(bob.handle), interval_ms: HOUR, max_count: 5 });
    const path = `/schedules/${schedule.id}`;
    const paused = await t.http.patch(path, { status: 'paused' }, alice.token);
    expectStatus(paused, 200);
    eq(paused.body.status, 'paused', 'after pausing');
    eq((await t.http.patch(path, { status: 'active' }, alice.token)).body.status, 'active', 'after resuming');
    expectError(
      await t.http.patch(path, { status: 'completed' }, alice.token),
      400,
      'INVALID_SCHEDULE',
      'an invalid status',
    );
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { status: 'paused' }],
      ['DELETE', undefined],
    ] as const) {
      expectError(
        await t.http.request(method, path, { token: mallory.token, body }),
        404,
        'NOT_FOUND',
        `${method} by another agent`,
      );
    }
    eq((await t.http.get('/schedules', mallory.token)).body.schedules, [], 'another agent’s list');
    eq((await t.http.get(path, alice.token)).body.status, 'active', 'unchanged by the other agent');
    expectStatus(await t.http.delete(path, alice.token), 200);
    expectError(
      await t.http.patch(path, { status: 'active' }, alice.token),
      400,
      'INVALID_SCHEDULE',
      'resuming a cancelled schedule',
    );
  },
);

scheduleTest(
  'schedules.quota',
  'at most ROOST_SCHEDULES_PER_AGENT active or paused schedules per agent → 429 QUOTA_EXCEEDED; cancelled ones do not count',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const ids: string[] = [];
    let refused: any;
    for (let i = 0; i < 101 && !refused; i++) {
      const reply = await t.http.post(
        '/schedules',
        { envelope: message(bob.handle), start_at: Date.now() + HOUR },
        alice.token,
      );
      if (reply.status === 201) ids.push(reply.body.id);
      else refused = reply;
    }
    if (!refused) t.skip('no 429 after 101 schedules: the quota is above the default 100');
    expectError(refused, 429, 'QUOTA_EXCEEDED', `schedule #${ids.length + 1}`);
    expectStatus(await t.http.delete(`/schedules/${ids[0]}`, alice.token), 200);
    const again = await t.http.post(
      '/schedules',
      { envelope: message(bob.handle), start_at: Date.now() + HOUR },
      alice.token,
    );
    expectStatus(again, 201, 'after cancelling one');
    ids.push(again.body.id);
    for (const id of ids.slice(1)) await t.http.delete(`/schedules/${id}`, alice.token);
    if (ids.length < 2) throw new Failure('the quota admits no schedule at all');
  },
);
