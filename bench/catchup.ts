import pg from 'pg';
import { headerJsonOf, storedEnvelopeOf, ulid } from '#domain';
import { createAgent, percentile, request, round, scratchDatabase, startOperatorProcess } from './support';

/** Fill a mailbox through SQL (seeding 100k envelopes through the API would dominate the run). */
async function seedMailbox(
  pool: pg.Pool,
  senderHandle: string,
  recipientHandle: string,
  count: number,
  readEvery: number,
) {
  const ids = await pool.query<{ id: number; handle: string }>('SELECT id, handle FROM agents WHERE handle = ANY($1)', [
    [senderHandle, recipientHandle],
  ]);
  const senderId = ids.rows.find((r) => r.handle === senderHandle)!.id;
  const mailboxId = ids.rows.find((r) => r.handle === recipientHandle)!.id;
  const base = Date.now() - count - 1000;
  const chunk = 5000;
  for (let start = 0; start < count; start += chunk) {
    const rows = Array.from({ length: Math.min(chunk, count - start) }, (_, i) => {
      const n = start + i;
      const createdAt = base + n;
      const posted = {
        id: ulid(createdAt),
        to: [recipientHandle],
        date_ms: createdAt,
        subject: `seed ${n}`,
        content_parts: [{ type: 'text' as const, text: `seeded envelope ${n}` }],
      };
      const stored = storedEnvelopeOf(posted, senderHandle, posted.content_parts);
      return {
        n,
        createdAt,
        id: posted.id,
        body: JSON.stringify(stored),
        header: headerJsonOf(stored, { type_hint: 'text', size_hint: 10, created_at: createdAt }),
      };
    });
    await pool.query(
      `INSERT INTO envelopes (id, sender_id, created_at, received_ms, body, header, recipients, self_addressed, search)
       SELECT id, $1, created_at, created_at, body, header, ARRAY[$2]::text[], false, ''::tsvector
       FROM unnest($3::text[], $4::bigint[], $5::text[], $6::text[]) AS t(id, created_at, body, header)`,
      [
        senderId,
        recipientHandle,
        rows.map((r) => r.id),
        rows.map((r) => r.createdAt),
        rows.map((r) => r.body),
        rows.map((r) => r.header),
      ],
    );
    await pool.query(
      `INSERT INTO mailbox_entries (mailbox_id, seq, envelope_id, created_at, kind, read)
       SELECT $1, seq, id, created_at, 'to', read FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::boolean[]) AS t(seq, id, created_at, read)`,
      [
        mailboxId,
        rows.map((r) => r.n + 1),
        rows.map((r) => r.id),
        rows.map((r) => r.createdAt),
        rows.map((r) => readEvery > 0 && r.n % readEvery !== 0),
      ],
    );
  }
  await pool.query('UPDATE mailboxes SET last_seq = $2, last_created_at = $3 WHERE agent_id = $1', [
    mailboxId,
    count,
    base + count,
  ]);
  await pool.query('ANALYZE envelopes; ANALYZE mailbox_entries');
  return mailboxId;
}

const KEYSET_PAGE_SQL = `
  select e.header, m.created_at, m.envelope_id
  from mailbox_entries m join envelopes e on e.id = m.envelope_id
  where m.mailbox_id = $1 and (m.created_at, m.envelope_id) > ($2::bigint, $3::text)
  order by m.created_at asc, m.envelope_id asc limit $4`;
const UNREAD_PAGE_SQL = `
  select e.header, m.created_at, m.envelope_id
  from mailbox_entries m join envelopes e on e.id = m.envelope_id
  where m.mailbox_id = $1 and not m.read
  order by m.created_at asc, m.envelope_id asc limit $2`;

/**
 * The raw baseline on the same Postgres: the same keyset walk and unread page through `pg`
 * (prepared, one connection), returning the rows' header text as a listing would.
 */
async function rawCatchup(pool: pg.Pool, smallId: number, bigId: number) {
  const client = await pool.connect();
  try {
    const walks: number[] = [];
    for (let run = 0; run < 7; run++) {
      const t0 = performance.now();
      let after: [number, string] = [0, ''];
      for (;;) {
        const page = await client.query<{ header: string; created_at: string; envelope_id: string }>({
          name: 'bench_keyset_page',
          text: KEYSET_PAGE_SQL,
          values: [smallId, after[0], after[1], 1000],
        });
        if (page.rows.length < 1000) break;
        const last = page.rows[page.rows.length - 1];
        after = [Number(last.created_at), last.envelope_id];
      }
      if (run > 1) walks.push(performance.now() - t0);
    }
    const calls: number[] = [];
    for (let i = 0; i < 55; i++) {
      const t0 = performance.now();
      await client.query({ name: 'bench_unread_page', text: UNREAD_PAGE_SQL, values: [bigId, 100] });
      if (i >= 5) calls.push(performance.now() - t0);
    }
    return { walks: walks.sort((a, b) => a - b), calls: calls.sort((a, b) => a - b) };
  } finally {
    client.release();
  }
}

export async function catchupScenario(): Promise<Array<Record<string, unknown>>> {
  const database = await scratchDatabase('roost_bench');
  const op = await startOperatorProcess({ DATABASE_URL: database.url });
  const pool = new pg.Pool({ connectionString: database.url, max: 4 });
  pool.on('error', () => undefined);
  try {
    await createAgent(op, '@bench.sender');
    const small = await createAgent(op, '@bench.small');
    const big = await createAgent(op, '@bench.big');
    const smallId = await seedMailbox(pool, '@bench.sender', '@bench.small', 5_000, 0);
    const bigId = await seedMailbox(pool, '@bench.sender', '@bench.big', 100_000, 100);

    // 1. page through 5,000 entries with limit=1000 until next_cursor is null
    const walks: number[] = [];
    let seen = 0;
    for (let run = 0; run < 7; run++) {
      const t0 = performance.now();
      let cursor: { created_at: number; envelope_id: string } | null = null;
      seen = 0;
      do {
        const query: string = cursor
          ? `&after_created_at=${cursor.created_at}&after_envelope_id=${cursor.envelope_id}`
          : '';
        const page = JSON.parse((await request(op.url, 'GET', `/mailbox?limit=1000${query}`, small)).text) as {
          envelope_headers: unknown[];
          next_cursor: { created_at: number; envelope_id: string } | null;
        };
        seen += page.envelope_headers.length;
        cursor = page.next_cursor;
      } while (cursor !== null);
      if (run > 1) walks.push(performance.now() - t0); // two warm-up walks
    }
    walks.sort((a, b) => a - b);

    // 2. unread page on a 100,000-entry mailbox (1% unread)
    const calls: number[] = [];
    for (let i = 0; i < 55; i++) {
      const t0 = performance.now();
      const reply = await request(op.url, 'GET', '/mailbox?unread=true&limit=100', big);
      if (reply.status !== 200) throw new Error(`unread listing: ${reply.status}`);
      if (i >= 5) calls.push(performance.now() - t0);
    }
    calls.sort((a, b) => a - b);
    const plan = await pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN select e.header, m.created_at, m.envelope_id
       from mailbox_entries m join envelopes e on e.id = m.envelope_id
       where m.mailbox_id = $1 and not m.read and true
       order by m.created_at asc, m.envelope_id asc limit 100`,
      [bigId],
    );
    const planText = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
    const raw = await rawCatchup(pool, smallId, bigId);
    const walkP50 = percentile(walks, 50);
    const unreadP50 = percentile(calls, 50);
    return [
      {
        scenario: 'catchup',
        entries: 5_000,
        limit: 1000,
        pages_walked_entries: seen,
        time_to_last_page_ms_p50: round(walkP50),
        time_to_last_page_ms_max: round(walks.at(-1)!),
        raw_time_to_last_page_ms_p50: round(percentile(raw.walks, 50)),
        ratio_raw_over_roost: round(percentile(raw.walks, 50) / walkP50, 3),
        target_ms: 150,
      },
      {
        scenario: 'catchup-unread',
        entries: 100_000,
        unread: 1_000,
        limit: 100,
        p50_ms: round(unreadP50),
        p99_ms: round(percentile(calls, 99)),
        raw_p50_ms: round(percentile(raw.calls, 50)),
        ratio_raw_over_roost: round(percentile(raw.calls, 50) / unreadP50, 3),
        target_p50_ms: 20,
        index: /Index (Only )?Scan using (\w+)/.exec(planText)?.[2] ?? null,
        plan: planText.split('\n').map((line) => line.trim()),
      },
    ];
  } finally {
    await pool.end();
    await op.stop();
    await database.drop();
  }
}
