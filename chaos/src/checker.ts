import type pg from 'pg';
import type { Fault, FaultKind } from './faults';
import type { ChaosListener } from './listener';
import type { Agent, Send } from './load';
import { faultFigures, faultTable, isReset, type FaultFigures, type KindFigures } from './figures';
import type { Crash } from './nodes';
import { request } from './util';

export interface ScheduleInfo {
  id: string;
  owner: string;
  to: string;
  startAt: number;
  endAt: number;
  intervalMs: number;
}

export interface CheckInput {
  db: pg.Client;
  sends: Send[];
  burst: Send[];
  loadSeconds: number;
  targetRate: number;
  offered: number;
  faults: Fault[];
  faultCounts: Record<FaultKind, number>;
  /** Postgres outages; `masked`: a blackhole partition overlapped it (faults.ts postgresOutages). */
  outages: Array<{ start: number; end: number; masked?: boolean }>;
  listeners: ChaosListener[];
  recipients: Agent[];
  senders: Agent[];
  schedules: ScheduleInfo[];
  apiUrls: string[];
  /** api node names, in the order of `Attempt.api`. */
  apiNames: string[];
  crashes: Crash[];
  startFailures: number;
  ready: Record<string, boolean>;
  running: Record<string, boolean>;
  startedAt: number;
}

export interface ScheduleResult {
  id: string;
  to: string;
  status: string;
  send_count: number;
  /** Runs an uninterrupted clock would have fired between start_at and end_at. */
  ideal_runs: number;
  envelopes: number;
  mailbox_entries: number;
  duplicates: number;
}

export interface ListenerResult {
  handle: string;
  expected: number;
  received: number;
  missing: number;
  duplicated: number;
  unexpected: number;
  out_of_order: number;
  connections: number;
  failed_connects: number;
  cursor_expired: number;
  frame_violations: number;
}

export interface Report {
  ok: boolean;
  failures: string[];
  load: {
    target_per_s: number;
    offered_per_s: number;
    accepted_per_s: number;
    load_seconds: number;
    envelopes_tried: number;
    envelopes_202: number;
    accepted_after_retry: number;
    abandoned: number;
    stored_without_202: number;
  };
  faults: { by_kind: Record<FaultKind, number>; total: number; list: Array<Record<string, unknown>> };
  requests: { total: number; by_status: Record<string, number>; by_error: Record<string, number>; resets: number };
  /** Per fault and per kind: failed requests by status, resets, recovery seconds, lost, duplicates. */
  fault_figures: { by_kind: KindFigures[]; each: FaultFigures[] };
  postgres_outage: {
    outages: number;
    seconds_down: number;
    requests: number;
    by_status: Record<string, number>;
    accepted_202_lost: number;
  };
  invariants: {
    lost: number;
    lost_entries: number;
    duplicated: number;
    half_written: number;
    orphan_entries: number;
    seq_gaps: number;
    order_violations: number;
    created_at_mismatch: number;
    recipients_mismatch: number;
    listing_mismatch: number;
    unexpected_envelopes: number;
  };
  schedules: {
    runs: number;
    ideal_runs: number;
    envelopes: number;
    duplicates: number;
    all_completed: boolean;
    each: ScheduleResult[];
  };
  listeners: { missing: number; duplicated: number; unexpected: number; each: ListenerResult[] };
  recovery: {
    processes_running: Record<string, boolean>;
    readyz: Record<string, boolean>;
    crashes: number;
    crash_list: Array<{ at_s: number; node: string; code: number | null; signal: string | null }>;
    start_failures: number;
    burst_sent: number;
    burst_202: number;
    burst_delivered: number;
  };
}

const inc = (map: Record<string, number>, key: string | number, by = 1) =>
  (map[String(key)] = (map[String(key)] ?? 0) + by);

/** Every `in` header id of an agent via `GET /mailbox` pages (ascending, 1000 a page). */
async function listing(apiUrl: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  let query = '';
  for (let page = 0; page < 10_000; page++) {
    const reply = await request('GET', `${apiUrl}/mailbox?order=asc&limit=1000${query}`, { token, timeoutMs: 30_000 });
    if (reply.status !== 200) throw new Error(`GET /mailbox: ${reply.status} ${JSON.stringify(reply.body)}`);
    ids.push(...(reply.body.envelope_headers as Array<{ id: string }>).map((h) => h.id));
    const next = reply.body.next_cursor as { created_at: number; envelope_id: string } | null;
    if (!next) return ids;
    query = `&after_created_at=${next.created_at}&after_envelope_id=${next.envelope_id}`;
  }
  throw new Error('GET /mailbox never ended');
}

/** The mailbox entries of every recipient in Postgres: handle → envelope ids (in seq order). */
export async function mailboxes(db: pg.Client): Promise<Map<string, string[]>> {
  const rows = (
    await db.query<{ handle: string; envelope_id: string }>(
      'select a.handle, m.envelope_id from mailbox_entries m join agents a on a.id = m.mailbox_id order by m.mailbox_id, m.seq',
    )
  ).rows;
  const byHandle = new Map<string, string[]>();
  for (const row of rows) {
    const list = byHandle.get(row.handle) ?? [];
    list.push(row.envelope_id);
    byHandle.set(row.handle, list);
  }
  return byHandle;
}

interface EnvelopeRow {
  id: string;
  created_at: string;
  sender: string;
  schedule_id: string | null;
}

/** What Postgres holds at the end: each recipient's entries (seq order) and every envelope. */
interface Stored {
  boxes: Map<string, string[]>;
  entrySets: Map<string, Set<string>>;
  envelopeRows: EnvelopeRow[];
  byId: Map<string, EnvelopeRow>;
}

/** Each section adds its findings to `failures`, in the order the report lists them. */
export async function check(input: CheckInput): Promise<Report> {
  const failures: string[] = [];
  const all = [...input.sends, ...input.burst];
  const inOutage = (at: number) => input.outages.some((o) => at >= o.start && at <= o.end);

  const requests = countRequests(all, inOutage);
  const stored = await readStored(input.db);
  const accepted = checkAccepted(all, stored, inOutage, failures);
  const entries = await checkEntries(input.db, failures);
  const unexpected = checkUnexpected(input, all, stored, failures);
  const listingMismatch = await checkListings(input, stored, failures);
  const scheduleResults = await checkSchedules(input, stored, failures);
  const listenerResults = checkListeners(input, stored, failures);
  const recovery = checkRecovery(input, requests, failures);

  const figures = faultFigures({
    faults: input.faults,
    sends: all,
    apiNames: input.apiNames,
    lostIds: accepted.lostIds,
    duplicateIds: entries.duplicateIds,
    startedAt: input.startedAt,
  });
  failures.push(...figures.failures);

  const loadAccepted = input.sends.filter((send) => send.accepted).length;
  return {
    ok: failures.length === 0,
    failures,
    load: {
      target_per_s: input.targetRate,
      offered_per_s: round(input.offered / input.loadSeconds),
      accepted_per_s: round(loadAccepted / input.loadSeconds),
      load_seconds: round(input.loadSeconds),
      envelopes_tried: input.sends.length,
      envelopes_202: loadAccepted,
      accepted_after_retry: input.sends.filter((send) => send.accepted && send.accepted.attempt > 0).length,
      abandoned: input.sends.filter((send) => !send.accepted).length,
      stored_without_202: all.filter((send) => !send.accepted && stored.byId.has(send.id)).length,
    },
    faults: {
      by_kind: input.faultCounts,
      total: input.faults.length,
      list: input.faults.map((f) => ({
        at_s: round((f.at - input.startedAt) / 1000),
        kind: f.kind,
        target: f.target,
        ...(f.mode ? { mode: f.mode } : {}),
        down_ms: f.downMs,
        ...(f.detail ? { detail: f.detail } : {}),
        up_after_s: f.upAt ? round((f.upAt - f.at) / 1000) : null,
      })),
    },
    requests: {
      total: Object.values(requests.byStatus).reduce((a, b) => a + b, 0),
      by_status: requests.byStatus,
      by_error: requests.byError,
      resets: all.reduce((sum, send) => sum + send.attempts.filter(isReset).length, 0),
    },
    fault_figures: { by_kind: figures.byKind, each: figures.each },
    postgres_outage: {
      outages: input.outages.length,
      seconds_down: round(recovery.outageSeconds),
      requests: requests.outage.requests,
      by_status: requests.outage.by_status,
      accepted_202_lost: accepted.lostInOutage,
    },
    invariants: {
      lost: accepted.lost,
      lost_entries: accepted.lostEntries,
      duplicated: entries.duplicated,
      half_written: entries.halfWritten + entries.orphanEntries,
      orphan_entries: entries.orphanEntries,
      seq_gaps: entries.seqGaps,
      order_violations: entries.orderViolations,
      created_at_mismatch: accepted.createdAtMismatch,
      recipients_mismatch: accepted.recipientsMismatch,
      listing_mismatch: listingMismatch,
      unexpected_envelopes: unexpected,
    },
    schedules: {
      runs: scheduleResults.reduce((a, s) => a + s.send_count, 0),
      ideal_runs: scheduleResults.reduce((a, s) => a + s.ideal_runs, 0),
      envelopes: scheduleResults.reduce((a, s) => a + s.envelopes, 0),
      duplicates: scheduleResults.reduce((a, s) => a + s.duplicates + Math.max(0, s.envelopes - s.send_count), 0),
      all_completed: scheduleResults.every((s) => s.status === 'completed'),
      each: scheduleResults,
    },
    listeners: {
      missing: listenerResults.reduce((a, l) => a + l.missing, 0),
      duplicated: listenerResults.reduce((a, l) => a + l.duplicated, 0),
      unexpected: listenerResults.reduce((a, l) => a + l.unexpected, 0),
      each: listenerResults,
    },
    recovery: {
      processes_running: input.running,
      readyz: input.ready,
      crashes: input.crashes.length,
      crash_list: input.crashes.map((c) => ({
        at_s: round((c.at - input.startedAt) / 1000),
        node: c.node,
        code: c.code,
        signal: c.signal,
      })),
      start_failures: input.startFailures,
      burst_sent: input.burst.length,
      burst_202: recovery.burst202,
      burst_delivered: recovery.burstDelivered,
    },
  };
}

/** Every attempt by status and by error code, and those that started during a Postgres outage. */
function countRequests(all: Send[], inOutage: (at: number) => boolean) {
  const byStatus: Record<string, number> = {};
  const byError: Record<string, number> = {};
  const outage = { requests: 0, by_status: {} as Record<string, number> };
  for (const send of all) {
    for (const attempt of send.attempts) {
      inc(byStatus, attempt.status);
      if (attempt.status !== 202 && attempt.code) inc(byError, `${attempt.status} ${attempt.code}`);
      if (inOutage(attempt.at)) {
        outage.requests++;
        inc(outage.by_status, attempt.status);
      }
    }
  }
  return { byStatus, byError, outage };
}

async function readStored(db: pg.Client): Promise<Stored> {
  const boxes = await mailboxes(db);
  const entrySets = new Map([...boxes].map(([handle, ids]) => [handle, new Set(ids)]));
  const envelopeRows = (
    await db.query<EnvelopeRow>(
      `select e.id, e.created_at::text, a.handle as sender, e.header::jsonb->>'schedule_id' as schedule_id
       from envelopes e join agents a on a.id = e.sender_id`,
    )
  ).rows;
  return { boxes, entrySets, envelopeRows, byId: new Map(envelopeRows.map((row) => [row.id, row])) };
}

/** Every envelope answered 202: stored, in each recipient's mailbox, as its 202 body said. */
function checkAccepted(all: Send[], stored: Stored, inOutage: (at: number) => boolean, failures: string[]) {
  let lost = 0;
  let lostEntries = 0;
  let createdAtMismatch = 0;
  let recipientsMismatch = 0;
  let lostInOutage = 0;
  const lostIds = new Set<string>();
  const lostExamples: string[] = [];
  for (const send of all.filter((each) => each.accepted)) {
    const recipients = [...send.to, ...send.cc];
    const missing = recipients.filter((handle) => !stored.entrySets.get(handle)?.has(send.id));
    if (missing.length > 0 || !stored.byId.has(send.id)) {
      lost++;
      lostIds.add(send.id);
      lostEntries += missing.length;
      if (lostExamples.length < 5) lostExamples.push(`${send.id} → ${missing.join(',')}`);
      const acceptedAttempt = send.attempts[send.accepted!.attempt];
      if (acceptedAttempt && inOutage(acceptedAttempt.at)) lostInOutage++;
    }
    const row = stored.byId.get(send.id);
    if (row && Number(row.created_at) !== send.accepted!.created_at) createdAtMismatch++;
    if ([...send.accepted!.recipients].sort().join() !== [...recipients].sort().join()) recipientsMismatch++;
  }
  if (lost > 0)
    failures.push(
      `lost: ${lost} envelopes answered 202 are missing from a recipient mailbox (e.g. ${lostExamples.join('; ')})`,
    );
  if (createdAtMismatch > 0)
    failures.push(`created_at mismatch: ${createdAtMismatch} 202 bodies disagree with the stored envelope`);
  if (recipientsMismatch > 0)
    failures.push(`recipients mismatch: ${recipientsMismatch} 202 bodies list other recipients than sent`);
  return { lost, lostEntries, createdAtMismatch, recipientsMismatch, lostInOutage, lostIds };
}

/** The tables' own invariants: no duplicate entry, no half-written envelope, seq 1..last_seq in time order. */
async function checkEntries(db: pg.Client, failures: string[]) {
  const duplicateIds = new Set(
    (
      await db.query<{ id: string }>(
        'select envelope_id as id from mailbox_entries group by mailbox_id, envelope_id having count(*) > 1',
      )
    ).rows.map((r) => r.id),
  );
  const duplicated = Number(
    (
      await db.query(
        'select count(*)::int as n from (select 1 from mailbox_entries group by mailbox_id, envelope_id having count(*) > 1) d',
      )
    ).rows[0].n,
  );
  if (duplicated > 0) failures.push(`duplicated: ${duplicated} (mailbox, envelope) pairs have more than one entry`);

  const halfWritten = Number(
    (
      await db.query(`
        select count(*)::int as n from (
          select e.id
          from envelopes e
          left join mailbox_entries m on m.envelope_id = e.id
          left join agents a on a.id = m.mailbox_id
          group by e.id, e.recipients
          having coalesce(array_agg(a.handle::text order by a.handle::text) filter (where a.handle is not null), '{}')
               <> (select coalesce(array_agg(r::text order by r::text), '{}') from unnest(e.recipients) r)
        ) h`)
    ).rows[0].n,
  );
  const orphanEntries = Number(
    (
      await db.query(
        'select count(*)::int as n from mailbox_entries m left join envelopes e on e.id = m.envelope_id where e.id is null',
      )
    ).rows[0].n,
  );
  if (halfWritten > 0) failures.push(`half-written: ${halfWritten} envelopes lack some of their mailbox entries`);
  if (orphanEntries > 0) failures.push(`half-written: ${orphanEntries} mailbox entries have no envelope`);

  const seqGaps = Number(
    (
      await db.query(`
        select count(*)::int as n from (
          select b.agent_id from mailboxes b left join mailbox_entries m on m.mailbox_id = b.agent_id
          group by b.agent_id, b.last_seq
          having count(m.seq) <> b.last_seq or coalesce(max(m.seq), 0) <> b.last_seq) g`)
    ).rows[0].n,
  );
  const orderViolations = Number(
    (
      await db.query(`
        select count(*)::int as n from (
          select created_at, lag(created_at) over (partition by mailbox_id order by seq) as previous from mailbox_entries) t
        where previous is not null and created_at <= previous`)
    ).rows[0].n,
  );
  if (seqGaps > 0) failures.push(`seq gaps: ${seqGaps} mailboxes whose entries are not exactly seq 1..last_seq`);
  if (orderViolations > 0)
    failures.push(`order: ${orderViolations} entries whose created_at does not increase with seq`);
  return { duplicateIds, duplicated, halfWritten, orphanEntries, seqGaps, orderViolations };
}

/** Nothing in the mailboxes that nobody sent: every envelope is one of ours or a schedule run. */
function checkUnexpected(input: CheckInput, all: Send[], stored: Stored, failures: string[]): number {
  const ours = new Set(all.map((send) => send.id));
  const scheduleIds = new Set(input.schedules.map((s) => s.id));
  let unexpected = 0;
  for (const row of stored.envelopeRows)
    if (!ours.has(row.id) && !(row.schedule_id && scheduleIds.has(row.schedule_id))) unexpected++;
  if (unexpected > 0) failures.push(`unexpected: ${unexpected} stored envelopes nobody sent`);
  return unexpected;
}

/** The REST listing agrees with the table, for every recipient (no duplicate, nothing missing). */
async function checkListings(input: CheckInput, stored: Stored, failures: string[]): Promise<number> {
  let listingMismatch = 0;
  for (const [i, agent] of input.recipients.entries()) {
    const ids = await listing(input.apiUrls[i % input.apiUrls.length], agent.token);
    const expected = stored.boxes.get(agent.handle) ?? [];
    if (
      ids.length !== expected.length ||
      new Set(ids).size !== ids.length ||
      ids.some((id) => !stored.entrySets.get(agent.handle)!.has(id))
    ) {
      listingMismatch++;
      failures.push(
        `GET /mailbox of ${agent.handle}: ${ids.length} ids (${new Set(ids).size} distinct), Postgres has ${expected.length}`,
      );
    }
  }
  return listingMismatch;
}

/** Each schedule completed, and fired exactly as many envelopes (and entries) as its send_count. */
async function checkSchedules(input: CheckInput, stored: Stored, failures: string[]): Promise<ScheduleResult[]> {
  const scheduleRows = new Map(
    (
      await input.db.query<{ id: string; status: string; send_count: number }>(
        'select id, status, send_count::int from schedules',
      )
    ).rows.map((r) => [r.id, r]),
  );
  const scheduleEnvelopes = new Map<string, string[]>();
  for (const row of stored.envelopeRows) {
    if (!row.schedule_id) continue;
    const list = scheduleEnvelopes.get(row.schedule_id) ?? [];
    list.push(row.id);
    scheduleEnvelopes.set(row.schedule_id, list);
  }
  const scheduleResults: ScheduleResult[] = input.schedules.map((schedule) => {
    const row = scheduleRows.get(schedule.id);
    const envelopes = scheduleEnvelopes.get(schedule.id) ?? [];
    const inBox = stored.boxes.get(schedule.to) ?? [];
    const envelopeSet = new Set(envelopes);
    const entries = inBox.filter((id) => envelopeSet.has(id));
    return {
      id: schedule.id,
      to: schedule.to,
      status: row?.status ?? 'missing',
      send_count: row?.send_count ?? 0,
      ideal_runs: Math.floor((schedule.endAt - schedule.startAt) / schedule.intervalMs) + 1,
      envelopes: envelopes.length,
      mailbox_entries: entries.length,
      duplicates: entries.length - new Set(entries).size,
    };
  });
  for (const s of scheduleResults) {
    if (s.status !== 'completed')
      failures.push(`schedule ${s.id}: status ${s.status} (expected completed after end_at)`);
    if (s.envelopes !== s.send_count || s.mailbox_entries !== s.send_count || s.duplicates > 0) {
      failures.push(
        `schedule ${s.id}: send_count ${s.send_count}, envelopes ${s.envelopes}, mailbox entries ${s.mailbox_entries}`,
      );
    }
    if (s.send_count === 0) failures.push(`schedule ${s.id}: never fired`);
  }
  return scheduleResults;
}

/** Each listener received exactly its mailbox, once each, in order, with valid frames. */
function checkListeners(input: CheckInput, stored: Stored, failures: string[]): ListenerResult[] {
  const listenerResults: ListenerResult[] = input.listeners.map((listener) => {
    const expected = stored.entrySets.get(listener.handle) ?? new Set<string>();
    let missing = 0;
    for (const id of expected) if (!listener.counts.has(id)) missing++;
    let extra = 0;
    for (const id of listener.counts.keys()) if (!expected.has(id)) extra++;
    return {
      handle: listener.handle,
      expected: expected.size,
      received: listener.counts.size,
      missing,
      duplicated: listener.duplicates,
      unexpected: extra,
      out_of_order: listener.outOfOrder,
      connections: listener.connections,
      failed_connects: listener.failedConnects,
      cursor_expired: listener.cursorExpired,
      frame_violations: listener.violationCount,
    };
  });
  for (const [i, l] of listenerResults.entries()) {
    if (l.missing || l.duplicated || l.unexpected || l.out_of_order || l.frame_violations || l.cursor_expired) {
      failures.push(
        `listener ${l.handle}: missing ${l.missing}, duplicated ${l.duplicated}, unexpected ${l.unexpected}, out of order ${l.out_of_order}, ` +
          `cursor.expired ${l.cursor_expired}, frame violations ${l.frame_violations} ${input.listeners[i].violations.join(' | ')}`,
      );
    }
  }
  return listenerResults;
}

/** The end state: the final burst accepted and delivered at once, every node ready and running, 503s (only) in outages. */
function checkRecovery(input: CheckInput, requests: ReturnType<typeof countRequests>, failures: string[]) {
  const burst202 = input.burst.filter((send) => send.attempts[0]?.status === 202).length;
  const burstDelivered = input.burst.filter((send) => {
    const listenersOf = input.listeners.filter((l) => [...send.to, ...send.cc].includes(l.handle));
    return listenersOf.every((l) => l.counts.get(send.id) === 1);
  }).length;
  if (burst202 !== input.burst.length)
    failures.push(`recovery: only ${burst202} of ${input.burst.length} final sends got 202 at once`);
  if (burstDelivered !== input.burst.length)
    failures.push(`recovery: only ${burstDelivered} of ${input.burst.length} final sends reached their listeners`);
  for (const [name, ok] of Object.entries(input.ready))
    if (!ok) failures.push(`recovery: ${name} /readyz is not 200 at the end`);
  for (const [name, ok] of Object.entries(input.running))
    if (!ok) failures.push(`recovery: ${name} is not running at the end`);
  if (input.crashes.length > 0) {
    failures.push(
      `crashes: ${input.crashes.length} unplanned process exits (${input.crashes.map((c) => c.node).join(', ')})`,
    );
  }
  const outageSeconds = input.outages.reduce((sum, o) => sum + (o.end - o.start), 0) / 1000;
  // An outage a blackhole hid from every node (see postgresOutages) need not produce a 503: its
  // requests stalled, then may have committed after both faults ended (seen in CI: 134 × 202).
  const visible = input.outages.filter((o) => !o.masked);
  const inVisibleOutage = (at: number) => visible.some((o) => at >= o.start && at <= o.end);
  const attemptsInVisible = [...input.sends, ...input.burst].flatMap((send) =>
    send.attempts.filter((attempt) => inVisibleOutage(attempt.at)),
  );
  if (attemptsInVisible.length > 0 && !attemptsInVisible.some((attempt) => attempt.status === 503)) {
    failures.push('postgres outage: no request got 503 while Postgres was down');
  }
  const unexpectedStatuses = Object.keys(requests.byStatus).filter((status) => !['202', '503', '0'].includes(status));
  if (unexpectedStatuses.length > 0) {
    failures.push(
      `requests: unexpected statuses ${unexpectedStatuses.map((s) => `${s}×${requests.byStatus[s]}`).join(', ')} (${JSON.stringify(requests.byError)})`,
    );
  }
  return { burst202, burstDelivered, outageSeconds };
}

const round = (value: number) => Math.round(value * 10) / 10;

/** The human table. */
export function table(report: Report): string {
  const rows: Array<[string, string]> = [];
  const row = (label: string, value: unknown) => rows.push([label, String(value)]);
  const l = report.load;
  row(
    'load held (envelopes/s)',
    `${l.accepted_per_s} accepted / ${l.offered_per_s} offered (target ${l.target_per_s}) over ${l.load_seconds} s`,
  );
  row(
    'envelopes tried / 202',
    `${l.envelopes_tried} / ${l.envelopes_202} (${l.accepted_after_retry} after a retry, ${l.abandoned} abandoned, ${l.stored_without_202} stored without a 202)`,
  );
  row(
    'faults injected',
    `${report.faults.total}: ${Object.entries(report.faults.by_kind)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  row(
    'requests by status',
    `${report.requests.total}: ${Object.entries(report.requests.by_status)
      .map(([s, n]) => `${s === '0' ? 'no answer' : s} ${n}`)
      .join(', ')} (${report.requests.resets} resets)`,
  );
  const p = report.postgres_outage;
  row(
    'during Postgres outages',
    `${p.outages} outages, ${p.seconds_down} s down; ${p.requests} requests: ${
      Object.entries(p.by_status)
        .map(([s, n]) => `${s === '0' ? 'no answer' : s} ${n}`)
        .join(', ') || 'none'
    }; 202 then lost ${p.accepted_202_lost}`,
  );
  const i = report.invariants;
  row('lost', i.lost);
  row('duplicated', i.duplicated);
  row('half-written', i.half_written);
  row('seq gaps / order violations', `${i.seq_gaps} / ${i.order_violations}`);
  row('202 body vs stored (created_at, recipients)', `${i.created_at_mismatch} / ${i.recipients_mismatch} mismatches`);
  row('GET /mailbox vs Postgres', `${i.listing_mismatch} mismatches`);
  row('unexpected envelopes', i.unexpected_envelopes);
  const s = report.schedules;
  row(
    'schedule runs vs envelopes',
    `${s.runs} runs (ideal clock ${s.ideal_runs}), ${s.envelopes} envelopes, ${s.duplicates} duplicates, all completed: ${s.all_completed}`,
  );
  const ls = report.listeners;
  row(
    'listeners missing / duplicated',
    `${ls.missing} / ${ls.duplicated} (unexpected ${ls.unexpected}; ${ls.each.map((e) => `${e.handle} ${e.received}/${e.expected} over ${e.connections} connections`).join(', ')})`,
  );
  const r = report.recovery;
  row(
    'recovery',
    `${Object.values(r.readyz).filter(Boolean).length}/${Object.keys(r.readyz).length} /readyz 200; final burst ${r.burst_202}/${r.burst_sent} 202, ${r.burst_delivered} delivered; crashes ${r.crashes}; failed starts ${r.start_failures}`,
  );
  row('result', report.ok ? 'PASS' : `FAIL (${report.failures.length})`);
  const width = Math.max(...rows.map(([label]) => label.length));
  const lines = rows.map(([label, value]) => `| ${label.padEnd(width)} | ${value}`);
  const rule = `+${'-'.repeat(width + 2)}+${'-'.repeat(60)}`;
  return [
    rule,
    ...lines,
    rule,
    '',
    'per fault kind (requests started while a fault was on):',
    ...faultTable(report.fault_figures.by_kind),
    ...report.failures.map((f) => `  ✗ ${f}`),
  ].join('\n');
}
