import { Clock } from '#core';
import { SchedulesRepository } from '#db';
import { isEnvelopeId } from '#domain';
import { SchedulesProcessor } from '../../apps/worker/src/schedules.processor';
import type { Reply } from '../support/client';
import { startOperator, type TestOperator } from '../support/operator';

/**
 * Schedules (EXTENSIONS.md §3) on Postgres. The worker's tick is driven by hand: the operator's
 * timers are parked (ROOST_SCHEDULE_TICK_MS one hour) and time is injected by replacing
 * `Clock.now`, so every firing happens exactly when the test says.
 */
const MIN_INTERVAL = 60_000;
const LEASE = 30_000;
const QUOTA = 3;

describe('schedules (EXTENSIONS.md §3)', () => {
  let op: TestOperator;
  let processor: SchedulesProcessor;
  let repository: SchedulesRepository;
  /** The injected time; only ever moves forward. */
  let now = Math.floor(Date.now() / 1000) * 1000;
  let owners = 0;

  beforeAll(async () => {
    op = await startOperator({
      env: {
        ROOST_SCHEDULE_TICK_MS: '3600000',
        ROOST_RETENTION_INTERVAL_MS: '86400000',
        ROOST_SCHEDULE_MIN_INTERVAL_MS: String(MIN_INTERVAL),
        ROOST_SCHEDULE_LEASE_MS: String(LEASE),
        ROOST_SCHEDULES_PER_AGENT: String(QUOTA),
      },
    });
    op.app.get(Clock).now = () => now;
    processor = op.app.get(SchedulesProcessor);
    repository = op.app.get(SchedulesRepository);
  });
  afterAll(async () => op?.close());

  const advance = (ms: number) => (now += ms);
  const tick = () => processor.tick();

  interface TestAgent {
    handle: string;
    token: string;
  }
  const agent = async (handle: string, fields: Record<string, unknown> = {}): Promise<TestAgent> => ({
    handle,
    token: await op.agent(handle, fields),
  });
  /** A fresh owner name and two agents under it: the schedule owner and its recipient. */
  const pair = async (): Promise<{ o: string; alice: TestAgent; bob: TestAgent }> => {
    const o = `sc${++owners}`;
    const [alice, bob] = await Promise.all([agent(`@${o}.alice`), agent(`@${o}.bob`)]);
    return { o, alice, bob };
  };

  const message = (to: string, fields: Record<string, unknown> = {}) => ({
    to: [to],
    subject: 'standup',
    content_parts: [{ type: 'text', text: 'what did you do yesterday?' }],
    ...fields,
  });
  const create = (token: string, body: Record<string, unknown>) => op.client.post('/schedules', body, token);
  const created = async (token: string, body: Record<string, unknown>) => {
    const reply = await create(token, body);
    if (reply.status !== 201) throw new Error(`POST /schedules: ${reply.status} ${reply.text}`);
    return reply.body as Record<string, any>;
  };
  const show = async (token: string, id: string) => {
    const reply = await op.client.get(`/schedules/${id}`, token);
    expect(reply.status).toBe(200);
    return reply.body as Record<string, any>;
  };
  /** Every header of the recipient's `in` feed, oldest first. */
  const inbox = async (token: string): Promise<any[]> => {
    const reply = await op.client.get('/mailbox?order=asc&limit=1000', token);
    expect(reply.status).toBe(200);
    return reply.body.envelope_headers as any[];
  };
  const fromSchedule = async (token: string, scheduleId: string) =>
    (await inbox(token)).filter((h) => h.schedule_id === scheduleId);

  const expectError = (reply: Reply, status: number, code: string, what = '') => {
    expect({ what, status: reply.status, code: reply.body?.error?.code }).toEqual({ what, status, code });
  };

  /** The value of one sample of the operator's /metrics (0 when absent). */
  const metric = async (name: string, labels = ''): Promise<number> => {
    const text = (await op.client.get('/metrics')).text;
    const escaped = `${name}${labels}`.replace(/[{}"[\]().*+?^$|\\]/g, '\\$&');
    const match = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : 0;
  };

  describe('creation', () => {
    it('a one-shot: 201 with the schedule object, next_run_at = start_at, unset fields null; date_ms is not kept', async () => {
      const { alice, bob } = await pair();
      const envelope = message(bob.handle, { date_ms: 12345 });
      const reply = await create(alice.token, { envelope, start_at: now + 5_000 });
      expect(reply.status).toBe(201);
      expect(reply.body).toEqual({
        id: expect.stringMatching(/^sch_01[0-9A-HJKMNP-TV-Z]{24}$/),
        status: 'active',
        envelope: message(bob.handle),
        interval_ms: null,
        next_run_at: now + 5_000,
        last_sent_at: null,
        last_envelope_id: null,
        send_count: 0,
        max_count: null,
        end_at: null,
        last_error: null,
        created_at: now,
        updated_at: now,
      });
      expect(await show(alice.token, reply.body.id)).toEqual(reply.body);
      // Creating sends nothing.
      expect(await inbox(bob.token)).toEqual([]);
    });

    it('a one-shot without start_at is due now', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, { envelope: message(bob.handle) });
      expect(schedule.next_run_at).toBe(now);
      expect(schedule.interval_ms).toBeNull();
      await op.client.delete(`/schedules/${schedule.id}`, alice.token);
    });

    it('a repeating schedule without start_at fires first one interval after creation; with start_at, at start_at', async () => {
      const { alice, bob } = await pair();
      const plain = await created(alice.token, { envelope: message(bob.handle), interval_ms: 90_000, max_count: 4 });
      expect(plain).toMatchObject({
        status: 'active',
        interval_ms: 90_000,
        max_count: 4,
        end_at: null,
        next_run_at: now + 90_000,
        send_count: 0,
      });
      const started = await created(alice.token, {
        envelope: message(bob.handle),
        interval_ms: MIN_INTERVAL,
        end_at: now + 10 * MIN_INTERVAL,
        start_at: now + 7,
      });
      expect(started).toMatchObject({
        interval_ms: MIN_INTERVAL,
        max_count: null,
        end_at: now + 10 * MIN_INTERVAL,
        next_run_at: now + 7,
      });
      for (const id of [plain.id, started.id]) await op.client.delete(`/schedules/${id}`, alice.token);
    });

    it('refuses bad schedules with 400 INVALID_SCHEDULE and creates nothing', async () => {
      const { alice, bob } = await pair();
      const envelope = message(bob.handle);
      const cases: Array<[string, Record<string, unknown>]> = [
        ['interval below the minimum', { envelope, interval_ms: MIN_INTERVAL - 1, max_count: 3 }],
        ['repeating without max_count or end_at', { envelope, interval_ms: MIN_INTERVAL }],
        ['end_at before the first run', { envelope, interval_ms: MIN_INTERVAL, end_at: now + MIN_INTERVAL - 1 }],
        ['one-shot end_at before start_at', { envelope, start_at: now + 10_000, end_at: now + 5_000 }],
        ['envelope with an id', { envelope: { ...envelope, id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y' } }],
        ['no envelope', { interval_ms: MIN_INTERVAL, max_count: 2 }],
        ['envelope not an object', { envelope: 'hello' }],
        ['interval_ms a string', { envelope, interval_ms: '60000', max_count: 2 }],
        ['interval_ms a fraction', { envelope, interval_ms: 60000.5, max_count: 2 }],
        ['interval_ms zero', { envelope, interval_ms: 0, max_count: 2 }],
        ['max_count zero', { envelope, interval_ms: MIN_INTERVAL, max_count: 0 }],
        ['max_count a string', { envelope, interval_ms: MIN_INTERVAL, max_count: '3' }],
        ['start_at negative', { envelope, start_at: -1 }],
        ['start_at a string', { envelope, start_at: 'tomorrow' }],
        ['end_at null', { envelope, interval_ms: MIN_INTERVAL, end_at: null }],
      ];
      for (const [what, body] of cases) expectError(await create(alice.token, body), 400, 'INVALID_SCHEDULE', what);
      expect((await op.client.get('/schedules', alice.token)).body).toEqual({ schedules: [] });
    });

    it('validates the envelope as if sent now: its own error codes, and the non-enumerating 404 for an unreachable recipient', async () => {
      const { o, alice, bob } = await pair();
      const guarded = await agent(`@${o}.guarded`, { policy: 'allowlist' });
      expectError(await create(alice.token, { envelope: message('not a handle') }), 400, 'INVALID_HANDLE');
      expectError(await create(alice.token, { envelope: { to: [bob.handle] } }), 400, 'INVALID_CONTENT');
      expectError(
        await create(alice.token, { envelope: message(bob.handle, { content_parts: [] }) }),
        400,
        'INVALID_CONTENT',
      );
      for (const to of [`@${o}.nobody`, guarded.handle]) {
        const reply = await create(alice.token, { envelope: message(to), interval_ms: MIN_INTERVAL, max_count: 2 });
        expect(reply.status).toBe(404);
        // Exactly what POST /messages answers for the same recipient.
        const direct = await op.client.post(
          '/messages',
          { ...message(to), id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y', date_ms: now },
          alice.token,
        );
        expect(reply.body).toEqual(direct.body);
        expect(reply.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
      }
      expect((await op.client.get('/schedules', alice.token)).body).toEqual({ schedules: [] });
      expectError(await create('not-a-token', { envelope: message(bob.handle) }), 401, 'UNAUTHORIZED');
    });

    it(`at most ${QUOTA} active or paused schedules per agent: the next is 429 QUOTA_EXCEEDED; cancelled and completed ones do not count`, async () => {
      const { alice, bob } = await pair();
      const body = { envelope: message(bob.handle), interval_ms: MIN_INTERVAL, max_count: 5 };
      const [first, second] = [await created(alice.token, body), await created(alice.token, body)];
      await created(alice.token, body);
      expect((await op.client.patch(`/schedules/${second.id}`, { status: 'paused' }, alice.token)).status).toBe(200);
      expectError(await create(alice.token, body), 429, 'QUOTA_EXCEEDED', 'a paused schedule still counts');
      expectError(
        await create(alice.token, { envelope: message(bob.handle) }),
        429,
        'QUOTA_EXCEEDED',
        'one-shots count too',
      );
      // The quota is per agent: bob is not affected.
      const bobs = await created(bob.token, { envelope: message(alice.handle), start_at: now + 1_000 });
      expect((await op.client.delete(`/schedules/${first.id}`, alice.token)).status).toBe(200);
      const fourth = await created(alice.token, body);
      expectError(await create(alice.token, body), 429, 'QUOTA_EXCEEDED', 'full again');
      expect((await op.client.get('/schedules', alice.token)).body.schedules).toHaveLength(4);
      for (const id of [second.id, fourth.id]) await op.client.delete(`/schedules/${id}`, alice.token);
      await op.client.delete(`/schedules/${bobs.id}`, bob.token);
      // Concurrent creations cannot overshoot the quota.
      const { alice: carol, bob: dave } = await pair();
      const replies = await Promise.all(
        Array.from({ length: 8 }, () => create(carol.token, { envelope: message(dave.handle), start_at: now + 1_000 })),
      );
      expect(replies.filter((r) => r.status === 201)).toHaveLength(QUOTA);
      expect(replies.filter((r) => r.status === 429)).toHaveLength(8 - QUOTA);
      for (const r of replies.filter((r) => r.status === 201))
        await op.client.delete(`/schedules/${r.body.id}`, carol.token);
    });
  });

  describe('reading, pausing, cancelling', () => {
    it("GET /schedules lists the caller's own, oldest first; another agent's schedule is 404 on every route", async () => {
      const { o, alice, bob } = await pair();
      const mallory = await agent(`@${o}.mallory`);
      const a = await created(alice.token, { envelope: message(bob.handle), start_at: now + 60_000 });
      const b = await created(alice.token, { envelope: message(bob.handle), interval_ms: MIN_INTERVAL, max_count: 2 });
      const list = await op.client.get('/schedules', alice.token);
      expect(list.status).toBe(200);
      expect(list.body.schedules.map((s: { id: string }) => s.id)).toEqual([a.id, b.id]);
      expect(list.body.schedules[0]).toEqual(a);
      expect((await op.client.get('/schedules', mallory.token)).body).toEqual({ schedules: [] });

      for (const reply of [
        await op.client.get(`/schedules/${a.id}`, mallory.token),
        await op.client.patch(`/schedules/${a.id}`, { status: 'paused' }, mallory.token),
        await op.client.delete(`/schedules/${a.id}`, mallory.token),
        await op.client.get('/schedules/sch_01JV3Z8W7Q4M2N6P8R0T2V4X6Y', alice.token),
        await op.client.get('/schedules/nonsense', alice.token),
      ]) {
        expectError(reply, 404, 'NOT_FOUND');
      }
      // Mallory's attempts changed nothing.
      expect(await show(alice.token, a.id)).toEqual(a);
      for (const id of [a.id, b.id]) await op.client.delete(`/schedules/${id}`, alice.token);
    });

    it('a paused schedule does not fire; resuming fires the missed run once, then stays on its grid', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, {
        envelope: message(bob.handle),
        interval_ms: MIN_INTERVAL,
        max_count: 5,
      });
      const paused = await op.client.patch(`/schedules/${schedule.id}`, { status: 'paused' }, alice.token);
      expect(paused.status).toBe(200);
      expect(paused.body).toEqual({ ...schedule, status: 'paused', updated_at: now });
      // Pausing twice is a no-op.
      expect((await op.client.patch(`/schedules/${schedule.id}`, { status: 'paused' }, alice.token)).body).toEqual(
        paused.body,
      );

      for (let i = 0; i < 4; i++) {
        advance(MIN_INTERVAL);
        await tick();
      }
      expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(0);
      expect((await show(alice.token, schedule.id)).send_count).toBe(0);

      advance(1_000);
      const resumed = await op.client.patch(`/schedules/${schedule.id}`, { status: 'active' }, alice.token);
      expect(resumed.status).toBe(200);
      expect(resumed.body.status).toBe('active');
      await tick();
      await tick();
      const sent = await fromSchedule(bob.token, schedule.id);
      expect(sent).toHaveLength(1);
      const after = await show(alice.token, schedule.id);
      expect(after.send_count).toBe(1);
      expect(after.next_run_at).toBeGreaterThan(now);
      expect((after.next_run_at - schedule.next_run_at) % MIN_INTERVAL).toBe(0);
      expect(after.next_run_at - now).toBeLessThanOrEqual(MIN_INTERVAL);

      expectError(
        await op.client.patch(`/schedules/${schedule.id}`, { status: 'cancelled' }, alice.token),
        400,
        'INVALID_SCHEDULE',
        'only paused|active',
      );
      expectError(
        await op.client.patch(`/schedules/${schedule.id}`, {}, alice.token),
        400,
        'INVALID_SCHEDULE',
        'no status',
      );
      await op.client.delete(`/schedules/${schedule.id}`, alice.token);
    });

    it('DELETE cancels: 200 with the schedule now cancelled, still readable, never fires, cannot be resumed', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, { envelope: message(bob.handle), start_at: now + 10_000 });
      advance(1);
      const cancelled = await op.client.delete(`/schedules/${schedule.id}`, alice.token);
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toEqual({ ...schedule, status: 'cancelled', updated_at: now });
      expect(await show(alice.token, schedule.id)).toEqual(cancelled.body);
      expect((await op.client.get('/schedules', alice.token)).body.schedules).toEqual([cancelled.body]);

      advance(20_000);
      await tick();
      expect(await inbox(bob.token)).toEqual([]);
      // Cancelling again answers the same; a cancelled schedule is final.
      expect((await op.client.delete(`/schedules/${schedule.id}`, alice.token)).body).toEqual(cancelled.body);
      expectError(
        await op.client.patch(`/schedules/${schedule.id}`, { status: 'active' }, alice.token),
        400,
        'INVALID_SCHEDULE',
      );
      expectError(
        await op.client.patch(`/schedules/${schedule.id}`, { status: 'paused' }, alice.token),
        400,
        'INVALID_SCHEDULE',
      );
      expect((await show(alice.token, schedule.id)).status).toBe('cancelled');
    });
  });

  describe('firing', () => {
    it('a one-shot fires once at start_at, with schedule_id in the header and date_ms = the scheduled time, then completes', async () => {
      const { alice, bob } = await pair();
      const startAt = now + 30_000;
      const schedule = await created(alice.token, { envelope: message(bob.handle), start_at: startAt });
      advance(29_999);
      await tick();
      expect(await inbox(bob.token)).toEqual([]);

      advance(1);
      await tick();
      const headers = await inbox(bob.token);
      expect(headers).toHaveLength(1);
      const [header] = headers;
      expect(header).toMatchObject({
        from: alice.handle,
        to: [bob.handle],
        subject: 'standup',
        date_ms: startAt,
        schedule_id: schedule.id,
      });
      expect(isEnvelopeId(header.id)).toBe(true);
      // The body is an ordinary envelope with the template's content.
      const body = await op.client.get(`/messages/${header.id}`, bob.token);
      expect(body.status).toBe(200);
      expect(body.body).toMatchObject({
        id: header.id,
        from: alice.handle,
        date_ms: startAt,
        content_parts: [{ type: 'text', text: 'what did you do yesterday?' }],
      });

      expect(await show(alice.token, schedule.id)).toEqual({
        ...schedule,
        status: 'completed',
        next_run_at: null,
        last_sent_at: now,
        last_envelope_id: header.id,
        send_count: 1,
        updated_at: now,
      });
      advance(60_000);
      await tick();
      expect(await inbox(bob.token)).toHaveLength(1);
    });

    it('a repeating schedule fires every interval with a fresh envelope id each time, and max_count completes it', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, {
        envelope: message(bob.handle),
        interval_ms: MIN_INTERVAL,
        max_count: 3,
      });
      const first = schedule.next_run_at as number;
      for (let run = 1; run <= 3; run++) {
        advance(MIN_INTERVAL - 1);
        await tick();
        expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(run - 1);
        advance(1);
        await tick();
        const sent = await fromSchedule(bob.token, schedule.id);
        expect(sent).toHaveLength(run);
        expect(sent.at(-1).date_ms).toBe(first + (run - 1) * MIN_INTERVAL);
        const state = await show(alice.token, schedule.id);
        expect(state).toMatchObject({ send_count: run, last_sent_at: now, last_envelope_id: sent.at(-1).id });
        expect(state.status).toBe(run < 3 ? 'active' : 'completed');
        expect(state.next_run_at).toBe(run < 3 ? first + run * MIN_INTERVAL : null);
      }
      const sent = await fromSchedule(bob.token, schedule.id);
      expect(new Set(sent.map((h) => h.id)).size).toBe(3);
      expect(sent.map((h) => h.date_ms)).toEqual([first, first + MIN_INTERVAL, first + 2 * MIN_INTERVAL]);
      advance(5 * MIN_INTERVAL);
      await tick();
      expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(3);
    });

    it('end_at completes a repeating schedule once the next slot would fall after it', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, {
        envelope: message(bob.handle),
        interval_ms: MIN_INTERVAL,
        end_at: now + 2.5 * MIN_INTERVAL,
      });
      for (let i = 0; i < 4; i++) {
        advance(MIN_INTERVAL);
        await tick();
      }
      expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(2);
      expect(await show(alice.token, schedule.id)).toMatchObject({
        status: 'completed',
        send_count: 2,
        next_run_at: null,
      });
    });

    it('runs missed while workers were down fire once on recovery (no burst), and next_run_at is the next grid slot after now', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, {
        envelope: message(bob.handle),
        interval_ms: MIN_INTERVAL,
        max_count: 100,
      });
      const first = schedule.next_run_at as number;
      advance(MIN_INTERVAL);
      await tick();
      expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(1);

      advance(10 * MIN_INTERVAL + 12_345); // ten intervals with no worker
      await tick();
      await tick();
      const sent = await fromSchedule(bob.token, schedule.id);
      expect(sent).toHaveLength(2);
      expect(sent[1].date_ms).toBe(first + MIN_INTERVAL); // the missed run, fired late once
      const state = await show(alice.token, schedule.id);
      expect(state.send_count).toBe(2);
      expect(state.next_run_at).toBe(first + 11 * MIN_INTERVAL);
      expect(state.next_run_at).toBeGreaterThan(now);

      // Back on the grid: the next slot fires on time, once.
      advance(state.next_run_at - now);
      await tick();
      expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(3);
      await op.client.delete(`/schedules/${schedule.id}`, alice.token);
    });

    it('a firing the accept path refuses sets failed with last_error: recipient deleted, recipient blocks the owner', async () => {
      const { o, alice, bob } = await pair();
      const carol = await agent(`@${o}.carol`);
      const toCarol = await created(alice.token, {
        envelope: message(carol.handle),
        interval_ms: MIN_INTERVAL,
        max_count: 3,
      });
      const toBob = await created(bob.token, {
        envelope: message(alice.handle),
        interval_ms: MIN_INTERVAL,
        max_count: 3,
      });
      expect(
        (await op.client.delete(`/_admin/agents/${encodeURIComponent(carol.handle)}`, op.adminToken)).status,
      ).toBeLessThan(300);
      expect((await op.client.post('/agents/me/blocks', { handle: bob.handle }, alice.token)).status).toBe(201);
      advance(MIN_INTERVAL);
      await tick();

      for (const [token, schedule] of [
        [alice.token, toCarol],
        [bob.token, toBob],
      ] as const) {
        const state = await show(token, schedule.id);
        expect(state).toMatchObject({
          status: 'failed',
          send_count: 0,
          last_sent_at: null,
          last_envelope_id: null,
          updated_at: now,
        });
        expect(state.last_error).toEqual(expect.stringContaining('NOT_FOUND'));
      }
      expect(await inbox(alice.token)).toEqual([]);
      // A failed schedule stays failed: ticking again sends nothing.
      advance(MIN_INTERVAL);
      await tick();
      expect(await inbox(alice.token)).toEqual([]);

      // Once the policy admits it again, resuming clears last_error and the run goes out.
      expect((await op.client.delete(`/agents/me/blocks/${encodeURIComponent(bob.handle)}`, alice.token)).status).toBe(
        200,
      );
      const resumed = await op.client.patch(`/schedules/${toBob.id}`, { status: 'active' }, bob.token);
      expect(resumed.body).toMatchObject({ status: 'active', last_error: null });
      await tick();
      expect(await fromSchedule(alice.token, toBob.id)).toHaveLength(1);
      expect((await show(bob.token, toBob.id)).send_count).toBe(1);
      await op.client.delete(`/schedules/${toBob.id}`, bob.token);
    });
  });

  describe('exactly one envelope per due run', () => {
    it('concurrent ticks (several workers) fire each due run once', async () => {
      const recipient = await agent(`@sc${++owners}.inbox`);
      const schedules: Array<{ token: string; id: string }> = [];
      for (let i = 0; i < 7; i++) {
        const owner = await agent(`@sc${++owners}.owner`);
        for (let j = 0; j < QUOTA; j++) {
          const s = await created(owner.token, {
            envelope: message(recipient.handle),
            interval_ms: MIN_INTERVAL,
            max_count: 3,
          });
          schedules.push({ token: owner.token, id: s.id });
        }
      }
      for (let run = 1; run <= 3; run++) {
        advance(MIN_INTERVAL);
        await Promise.all(Array.from({ length: 6 }, () => tick()));
        const headers = (await inbox(recipient.token)).filter((h) => h.schedule_id !== undefined);
        expect(headers).toHaveLength(schedules.length * run);
        expect(new Set(headers.map((h) => h.id)).size).toBe(headers.length);
        for (const s of schedules) {
          expect(headers.filter((h) => h.schedule_id === s.id)).toHaveLength(run);
          expect((await show(s.token, s.id)).send_count).toBe(run);
        }
      }
    });

    it('a worker that dies after the envelope committed but before recording the run: its lease expires and the retry replays the same envelope', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, {
        envelope: message(bob.handle),
        interval_ms: MIN_INTERVAL,
        max_count: 2,
      });
      const replayedBefore = await metric('roost_schedule_firings_total', '{result="replayed"}');

      // The "dead" worker: the envelope commits, then recordRun never happens and the lease is
      // never given back (a killed process releases nothing).
      const recordRun = jest.spyOn(repository, 'recordRun').mockRejectedValueOnce(new Error('worker killed'));
      const retryAt = jest.spyOn(repository, 'retryAt').mockResolvedValueOnce(undefined);
      try {
        advance(MIN_INTERVAL);
        await tick();
        expect(recordRun).toHaveBeenCalledTimes(1);
        expect(retryAt).toHaveBeenCalledTimes(1);
      } finally {
        recordRun.mockRestore();
        retryAt.mockRestore();
      }
      const sent = await fromSchedule(bob.token, schedule.id);
      expect(sent).toHaveLength(1);
      expect(await show(alice.token, schedule.id)).toMatchObject({
        send_count: 0,
        last_envelope_id: null,
        status: 'active',
      });

      // While the lease holds, no other worker takes the run.
      advance(LEASE - 1_000);
      await Promise.all([tick(), tick()]);
      expect(await fromSchedule(bob.token, schedule.id)).toHaveLength(1);
      expect((await show(alice.token, schedule.id)).send_count).toBe(0);

      // Past the lease, a survivor retries run 1: same envelope id, an idempotent replay.
      advance(2_000);
      await Promise.all([tick(), tick(), tick()]);
      const after = await fromSchedule(bob.token, schedule.id);
      expect(after).toHaveLength(1);
      expect(after[0].id).toBe(sent[0].id);
      expect(await show(alice.token, schedule.id)).toMatchObject({
        send_count: 1,
        last_envelope_id: sent[0].id,
        status: 'active',
      });
      expect(await metric('roost_schedule_firings_total', '{result="replayed"}')).toBe(replayedBefore + 1);

      // Run 2 is a new envelope, and completes the schedule.
      advance(MIN_INTERVAL);
      await tick();
      const final = await fromSchedule(bob.token, schedule.id);
      expect(final).toHaveLength(2);
      expect(final[1].id).not.toBe(sent[0].id);
      expect(await show(alice.token, schedule.id)).toMatchObject({ send_count: 2, status: 'completed' });
    });

    it('a transient failure after the commit is retried on a later tick (not in the same one); the retry replays, still one envelope', async () => {
      const { alice, bob } = await pair();
      const schedule = await created(alice.token, { envelope: message(bob.handle), start_at: now + 1_000 });
      const recordRun = jest.spyOn(repository, 'recordRun').mockRejectedValueOnce(new Error('connection reset'));
      try {
        advance(1_000);
        await tick();
      } finally {
        recordRun.mockRestore();
      }
      expect((await show(alice.token, schedule.id)).send_count).toBe(0);
      await tick(); // same instant: the run waits for its retry time
      expect((await show(alice.token, schedule.id)).send_count).toBe(0);
      advance(2_000);
      await tick();
      const sent = await fromSchedule(bob.token, schedule.id);
      expect(sent).toHaveLength(1);
      expect(await show(alice.token, schedule.id)).toMatchObject({
        send_count: 1,
        status: 'completed',
        last_envelope_id: sent[0].id,
      });
    });
  });

  it('metrics: roost_schedule_firings_total counts firings by result, roost_schedule_lag_seconds shows how late the oldest due run is', async () => {
    const { o, alice, bob } = await pair();
    const gone = await agent(`@${o}.gone`);
    const sentBefore = await metric('roost_schedule_firings_total', '{result="sent"}');
    const refusedBefore = await metric('roost_schedule_firings_total', '{result="refused"}');
    await created(alice.token, { envelope: message(bob.handle), start_at: now });
    await created(alice.token, { envelope: message(gone.handle), start_at: now });
    await op.client.delete(`/_admin/agents/${encodeURIComponent(gone.handle)}`, op.adminToken);
    advance(90_000);
    await tick();
    expect(await metric('roost_schedule_firings_total', '{result="sent"}')).toBe(sentBefore + 1);
    expect(await metric('roost_schedule_firings_total', '{result="refused"}')).toBe(refusedBefore + 1);
    expect(await metric('roost_schedule_lag_seconds')).toBe(90);
    await tick();
    expect(await metric('roost_schedule_lag_seconds')).toBe(0);
  });
});
