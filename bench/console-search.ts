import pg from 'pg';
import { percentile, request, round, scratchDatabase, startOperatorProcess } from './support';

const AGENTS = 10_000;
const ORGS = 10;
const ROUTE = '/_admin/agents';
const WORDS = [
  'billing',
  'support',
  'research',
  'triage',
  'planner',
  'scribe',
  'courier',
  'auditor',
  'builder',
  'watcher',
];

/**
 * 10,000 agents in 10 organizations, seeded through SQL (10,000 creates through the API would
 * dominate the run), each with a few unread entries for `include=unread`.
 */
async function seedAgents(pool: pg.Pool): Promise<void> {
  const now = Date.now();
  await pool.query(
    `INSERT INTO orgs (name, admin_token_hash, created_at, updated_at)
     SELECT 'org' || o, md5('org' || o), $1, $1 FROM generate_series(0, $2::int - 1) AS o`,
    [now, ORGS],
  );
  await pool.query(
    `INSERT INTO agents (handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
     SELECT '@org' || (n % $2) || '.agent' || lpad(n::text, 5, '0'), 'org' || (n % $2), md5('agent' || n), 'open',
            initcap(($3::text[])[1 + n % 10]) || ' ' || initcap(($3::text[])[1 + (n / 10) % 10]) || ' ' || n, 'private', $4, $4
     FROM generate_series(0, $1::int - 1) AS n`,
    [AGENTS, ORGS, WORDS, now],
  );
  await pool.query('INSERT INTO mailboxes (agent_id) SELECT id FROM agents');
  await pool.query('ANALYZE agents; ANALYZE mailboxes');
}

/** Server-side duration of the last request: the delta of the route's duration histogram sum. */
async function serverSeconds(url: string): Promise<number> {
  const text = (await request(url, 'GET', '/metrics', undefined)).text;
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`roost_http_request_duration_seconds_sum{route="${ROUTE}",method="GET"}`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

/**
 * `GET /_admin/agents` search and keyset paging at 10,000 agents (issue 19: ≤ 100 ms server-side):
 * a mix of the console's queries (a substring of display names that many match, a handle that one
 * matches, a needle nobody matches — the whole table scanned —, plain paging deep into the list,
 * an organization's token, `include=unread`), each timed by the operator's own request histogram.
 */
export async function consoleSearchScenario(): Promise<Record<string, unknown>> {
  const database = await scratchDatabase('roost_bench');
  const op = await startOperatorProcess({ DATABASE_URL: database.url });
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  pool.on('error', () => undefined);
  try {
    await seedAgents(pool);
    const orgToken = (await request(op.url, 'POST', '/_admin/orgs/org3/rotate-token', op.adminToken)).text;
    const org3 = (JSON.parse(orgToken) as { admin_token: string }).admin_token;
    const queries: Array<[string, string]> = [
      ['many', '?q=builder&limit=50'],
      ['one', '?q=agent04321&limit=50'],
      ['none', '?q=zzzz&limit=50'],
      ['deep-page', '?limit=200&after=%40org9.agent09000'],
      ['unread', '?q=watcher&limit=200&include=unread'],
      ['case', '?q=SCRIBE%20TRIAGE&limit=50'],
    ];
    const server: number[] = [];
    const roundTrip: number[] = [];
    const byQuery: Record<string, number[]> = {};
    let matched = 0;
    for (let run = 0; run < 22; run++) {
      for (const [name, query] of [...queries, ['org', '?q=support&limit=50'] as [string, string]]) {
        const token = name === 'org' ? org3 : op.adminToken;
        const before = await serverSeconds(op.url);
        const t0 = performance.now();
        const reply = await request(op.url, 'GET', `${ROUTE}${query}`, token);
        const elapsed = performance.now() - t0;
        if (reply.status !== 200) throw new Error(`${query}: ${reply.status} ${reply.text}`);
        const ms = ((await serverSeconds(op.url)) - before) * 1000;
        if (run < 2) continue; // warm-up
        if (name === 'one') matched = (JSON.parse(reply.text) as { agents: unknown[] }).agents.length;
        server.push(ms);
        roundTrip.push(elapsed);
        (byQuery[name] ??= []).push(ms);
      }
    }
    server.sort((a, b) => a - b);
    roundTrip.sort((a, b) => a - b);
    const perQuery = Object.fromEntries(
      Object.entries(byQuery).map(([name, values]) => [
        name,
        round(
          percentile(
            values.sort((a, b) => a - b),
            50,
          ),
        ),
      ]),
    );
    return {
      scenario: 'console-search',
      agents: AGENTS,
      requests: server.length,
      server_ms_p50: round(percentile(server, 50)),
      server_ms_p99: round(percentile(server, 99)),
      server_ms_max: round(server.at(-1)!),
      round_trip_ms_p50: round(percentile(roundTrip, 50)),
      server_ms_p50_by_query: perQuery,
      one_match_found: matched,
      target_ms: 100,
    };
  } finally {
    await pool.end();
    await op.stop();
    await database.drop();
  }
}
