import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { CompiledQuery, sql } from 'kysely';
import pg from 'pg';
import { runMigrations } from '../../apps/roost/src/migrate';
import { loadMigrations, openPostgres } from '#db';
import { ulid } from '#domain';
import { TestClient } from '../support/client';
import { createTestDatabase } from '../support/database';
import { PgBouncer, pgbouncerBinary } from '../support/pgbouncer';
import { ROOST_MAIN, startAll, stopAll, type TestProcess } from '../support/processes';
import { testDatabaseUrl, testRedisUrl } from '../support/services';
import { ResumingClient } from './cluster';

/**
 * Roost behind Debian's PgBouncer in transaction mode (docs/operations.md "PgBouncer"), the
 * production topology the runbook recommends: a private `pgbouncer` on a free loopback port in
 * front of the test Postgres, its own databases per run.
 *
 * - A role not told about the pooler stops at start with an error naming ROOST_DB_POOLER, whether
 *   PgBouncer refuses Roost's startup parameter or drops it (ignore_startup_parameters).
 * - `roost migrate` through the pooler: several at once apply each migration exactly once (the
 *   migration lock is transaction-scoped), with one server connection or several.
 * - ROOST_DB_STATEMENT_TIMEOUT_MS holds inside Roost's transactions through the pooler and does
 *   not leak to the server session's next client.
 * - api ×2 + gateway + worker through the pooler under concurrent load (several senders,
 *   multi-recipient envelopes, a schedule firing, WebSocket listeners): every 202 is in Postgres
 *   once per recipient, no 5xx, every frame arrives; the same stack direct to Postgres takes the
 *   same load in alternating windows, and both stacks' figures are printed (figures, not
 *   assertions).
 *
 * This is the e2e tier (not deploy): it spawns the built operator under load and needs the shared
 * Postgres and Redis that the e2e tier's global setup provides. It installs nothing: without the
 * `pgbouncer` binary it skips, except under ROOST_TEST_REQUIRE_SERVICES=1 (CI), where it fails.
 */

jest.setTimeout(420_000);

const binary = pgbouncerBinary();
const required = process.env.ROOST_TEST_REQUIRE_SERVICES === '1';
if (!binary && !required) {
  process.stderr.write(
    'pgbouncer.test.ts: skipped, no pgbouncer binary (apt-get install pgbouncer, or .ci/pgbouncer.sh)\n',
  );
}

const SENDERS = 6;
const RECIPIENTS = 4;
const CONCURRENCY = 12;
/** Timed load: ROUNDS alternating windows per stack. */
const WINDOW_MS = 2_000;
const ROUNDS = Number(process.env.ROOST_TEST_PGBOUNCER_ROUNDS ?? 3);
const WARMUP_MS = 2_000;
/** Roost's pool per process, and PgBouncer's server connections for the load database. */
const ROOST_POOL = 6;
/** Four operators start at once on a shared 2-core machine: generous. */
const START_MS = 120_000;
const BOUNCER_POOL = 8;

type Database = { url: string; drop: () => Promise<void> };
const databases: Database[] = [];
const bouncers: PgBouncer[] = [];
let strict: PgBouncer;
let lenient: PgBouncer;
let direct: pg.Pool | undefined;

const dbName = (database: Database) => new URL(database.url).pathname.slice(1);

async function fresh(): Promise<Database> {
  const database = await createTestDatabase('roost_pgb');
  databases.push(database);
  return database;
}

let loadPooled: Database;
let loadDirect: Database;
let migrateOne: Database;
let migrateThree: Database;
let timeouts: Database;

(binary || required ? describe : describe.skip)('Roost behind PgBouncer in transaction mode', () => {
  beforeAll(async () => {
    if (!binary)
      throw new Error(
        'pgbouncer is not installed: ROOST_TEST_REQUIRE_SERVICES=1 needs it (.ci/pgbouncer.sh installs it)',
      );
    [loadPooled, loadDirect, migrateOne, migrateThree, timeouts] = await Promise.all([
      fresh(),
      fresh(),
      fresh(),
      fresh(),
      fresh(),
    ]);
    direct = new pg.Pool({ connectionString: testDatabaseUrl(), max: 2 });
    // The runbook's advice for single statements behind the pooler (the role's default timeout);
    // `timeouts` keeps the server default (none) to show what Roost sets itself.
    for (const database of [loadPooled, migrateOne, migrateThree]) {
      await direct.query(`ALTER DATABASE ${dbName(database)} SET statement_timeout = '15s'`);
    }
    // As Debian ships it: no ignore_startup_parameters, so it refuses what it does not track.
    strict = await PgBouncer.start({
      upstream: testDatabaseUrl(),
      poolMode: 'transaction',
      defaultPoolSize: BOUNCER_POOL,
      databases: {
        roost: { dbname: dbName(loadPooled) },
        migrate_one: { dbname: dbName(migrateOne), poolSize: 1 },
        migrate_three: { dbname: dbName(migrateThree), poolSize: 3 },
        timeouts: { dbname: dbName(timeouts), poolSize: 1 },
      },
    });
    bouncers.push(strict);
    // What the SRE did to get past the refusal: statement_timeout silently dropped.
    lenient = await PgBouncer.start({
      upstream: testDatabaseUrl(),
      poolMode: 'transaction',
      ignoreStartupParameters: ['statement_timeout'],
      databases: { roost: { dbname: dbName(timeouts), poolSize: 2 } },
    });
    bouncers.push(lenient);
  });

  afterAll(async () => {
    await Promise.all(bouncers.map((bouncer) => bouncer.stop()));
    await direct?.end();
    await Promise.all(databases.map((database) => database.drop().catch(() => undefined)));
  });

  it('a role not told about the pooler stops at start naming ROOST_DB_POOLER (startup parameter refused, or dropped)', async () => {
    // The operator itself: a configuration error (exit 78), not a node that answers 500s.
    const exit = await runToExit({
      DATABASE_URL: strict.url('timeouts'),
      REDIS_URL: testRedisUrl(),
      ROOST_ROLE: 'api',
      ROOST_ADMIN_TOKEN: `admin-${ulid()}`,
      ROOST_HOST: '127.0.0.1',
      PORT: '0',
    });
    expect(exit.code).toBe(78);
    expect(exit.stderr).toContain(
      'roost: configuration error: ROOST_DB_POOLER: Postgres refused the connection (unsupported startup parameter: statement_timeout)',
    );
    await expect(runMigrations({ DATABASE_URL: strict.url('timeouts') })).rejects.toThrow(
      /^ROOST_DB_POOLER: .*unsupported startup parameter: statement_timeout/,
    );
    await expect(runMigrations({ DATABASE_URL: lenient.url('roost') })).rejects.toThrow(
      /^ROOST_DB_POOLER: Postgres reports statement_timeout 0 ms where Roost asked for 15000 ms/,
    );
    // Told, both work.
    const versions = loadMigrations().map((m) => m.version);
    await expect(
      runMigrations({ DATABASE_URL: lenient.url('roost'), ROOST_DB_POOLER: 'transaction' }),
    ).resolves.toEqual(versions);
  });

  it.each([
    ['one server connection', 'migrate_one', () => migrateOne],
    ['three server connections', 'migrate_three', () => migrateThree],
  ])(
    'four `roost migrate` at once through the pooler (%s) apply each migration exactly once',
    async (_what, alias, target) => {
      const versions = loadMigrations().map((m) => m.version);
      const env = { DATABASE_URL: strict.url(alias), ROOST_DB_POOLER: 'transaction' };
      const results = await Promise.all([1, 2, 3, 4].map(() => runMigrations(env)));
      for (const result of results) expect(result).toEqual(versions);
      const name = dbName(target());
      const check = new pg.Client({ connectionString: target().url });
      await check.connect();
      try {
        const applied = await check.query<{ version: string }>(
          'select version from schema_migrations order by version',
        );
        expect(applied.rows.map((row) => row.version)).toEqual(versions);
        // Transaction-scoped: no advisory lock is left on any server session the pooler keeps.
        const locks = await check.query<{ n: string }>(
          `select count(*) as n from pg_locks l join pg_database d on d.oid = l.database where l.locktype = 'advisory' and d.datname = $1`,
          [name],
        );
        expect(Number(locks.rows[0].n)).toBe(0);
      } finally {
        await check.end();
      }
    },
  );

  it("ROOST_DB_STATEMENT_TIMEOUT_MS holds in Roost's transactions through the pooler and does not leak to the next client", async () => {
    const database = openPostgres({
      url: strict.url('timeouts'),
      poolSize: 2,
      statementTimeoutMs: 1_234,
      pooler: 'transaction',
    });
    try {
      const inTransaction = await database.transaction((trx) =>
        trx.query<{ statement_timeout: string }>('show statement_timeout'),
      );
      expect(inTransaction[0].statement_timeout).toBe('1234ms');
      const inKysely = await database.db
        .transaction()
        .execute((trx) => sql<{ statement_timeout: string }>`show statement_timeout`.execute(trx));
      expect(inKysely.rows[0].statement_timeout).toBe('1234ms');
      // The pool has one server connection: this runs on the session those transactions used.
      const after = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(database.db);
      expect(after.rows[0].statement_timeout).toBe('0');
      // And it is enforced: a statement longer than the timeout is cancelled (57014).
      await expect(database.transaction((trx) => trx.query('select pg_sleep(3)'))).rejects.toMatchObject({
        code: '57014',
      });
      // Hot queries run unnamed: the same one twice, across server sessions, is fine.
      const query = CompiledQuery.raw('select $1::int + 1 as n', [41]);
      for (let i = 0; i < 3; i++)
        expect(await database.prepared<{ n: number }>('roost_test_add', query)).toEqual([{ n: 42 }]);
    } finally {
      await database.close();
    }
  });

  it('named statements forced on through a pooler that does not keep them: the failure names the setting, once', async () => {
    const warnings: string[] = [];
    const database = openPostgres({
      url: strict.url('timeouts'),
      poolSize: 2,
      statementTimeoutMs: 5_000,
      pooler: 'transaction',
      preparedStatements: true,
      onWarning: (message) => warnings.push(message),
    });
    try {
      const query = CompiledQuery.raw('select $1::int as n', [1]);
      // Two client connections, one server session (pool_size=1): the second prepares a name the
      // session already has, as Roost's accept path did behind PgBouncer (issue 14).
      await database.withSession(async (first) => {
        await first.prepared('roost_test_named', query);
        await database.withSession(async (second) => {
          for (let i = 0; i < 2; i++)
            await expect(second.prepared('roost_test_named', query)).rejects.toMatchObject({ code: '42P05' });
        });
      });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/already exists.*set ROOST_DB_PREPARED_STATEMENTS=off$/);
    } finally {
      await database.close();
    }
  });

  it('api ×2, gateway and worker through PgBouncer under load: every 202 durable once per recipient, no 5xx, frames arrive (and the same direct)', async () => {
    // Both stacks run side by side and take the load in alternating windows (A B, B A, …), so the
    // shared machine's drifting load weighs on both alike.
    const targets: LoadTarget[] = [];
    try {
      targets.push(
        await LoadTarget.start('pgbouncer (transaction mode)', strict.url('roost'), loadPooled.url, {
          ROOST_DB_POOLER: 'transaction',
        }),
      );
      targets.push(await LoadTarget.start('direct Postgres', loadDirect.url, loadDirect.url, {}));
      for (const target of targets) await target.drive(WARMUP_MS, false);
      const loadSpan = ROUNDS * WINDOW_MS * targets.length;
      for (const target of targets) await target.schedule(Date.now() + loadSpan / 2);
      for (let round = 0; round < ROUNDS; round++) {
        for (const target of round % 2 === 0 ? targets : [...targets].reverse()) await target.drive(WINDOW_MS, true);
      }
      const runs = [];
      for (const target of targets) runs.push(await target.verify());
      const report = {
        scenario: 'pgbouncer-vs-direct',
        window_ms: WINDOW_MS,
        rounds: ROUNDS,
        concurrency: CONCURRENCY,
        roost_pool_per_process: ROOST_POOL,
        pgbouncer_server_connections: BOUNCER_POOL,
        runs,
      };
      process.stdout.write(`${JSON.stringify(report)}\n`);
    } finally {
      await Promise.all(targets.map((target) => target.stop()));
    }
  });
});

interface Agent {
  handle: string;
  token: string;
}

/** Run the operator until it exits (it must, within START_MS); its exit code and stderr. */
function runToExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [ROOST_MAIN], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`the operator did not exit within ${START_MS} ms:\n${stderr}`));
    }, START_MS);
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code, stderr });
    });
  });
}

/**
 * api ×2, gateway and worker on one database URL, with senders, recipients listening on the
 * gateway, and everything they were told was accepted.
 */
class LoadTarget {
  /** Envelope id → the handles that must each hold it exactly once. */
  readonly expected = new Map<string, string[]>();
  /** Answers of the timed windows (any non-202 of the warm-up too). */
  readonly statuses = new Map<number, number>();
  readonly failures: string[] = [];
  readonly latencies: number[] = [];
  private measuredMs = 0;
  private n = 0;
  private scheduleId: string | undefined;

  private constructor(
    readonly label: string,
    private readonly checkUrl: string,
    private readonly nodes: TestProcess[],
    private readonly apis: TestClient[],
    private readonly senders: Agent[],
    private readonly recipients: Agent[],
    private readonly listeners: ResumingClient[],
  ) {}

  /** All four at once: their start-up migrations race through the same URL. */
  static async start(
    label: string,
    databaseUrl: string,
    checkUrl: string,
    extra: Record<string, string>,
  ): Promise<LoadTarget> {
    const adminToken = `admin-${ulid()}`;
    const env = {
      DATABASE_URL: databaseUrl,
      REDIS_URL: testRedisUrl(),
      ROOST_REDIS_PREFIX: `roost-e2e:${ulid()}:`,
      ROOST_ADMIN_TOKEN: adminToken,
      ROOST_LOG_LEVEL: 'warn',
      ROOST_HOST: '127.0.0.1',
      ROOST_RATE_LIMIT_PER_S: '0',
      ROOST_DB_POOL_SIZE: String(ROOST_POOL),
      ROOST_SCHEDULE_TICK_MS: '200',
      ROOST_RETENTION_INTERVAL_MS: '86400000',
      ROOST_METRICS_PORT: '0',
      ...extra,
    };
    const nodes = await startAll(
      (['api', 'api', 'gateway', 'worker'] as const).map((role, i) => ({
        name: `${label}: ${role}-${i}`,
        env: { ...env, ROOST_ROLE: role },
        startTimeoutMs: START_MS,
      })),
    );
    const listeners: ResumingClient[] = [];
    try {
      const apis = [new TestClient(nodes[0].url), new TestClient(nodes[1].url)];
      const agent = async (handle: string): Promise<Agent> => {
        const reply = await apis[0].post('/_admin/agents', { handle, policy: 'open' }, adminToken);
        if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
        return { handle, token: reply.body.token as string };
      };
      const senders = await Promise.all(Array.from({ length: SENDERS }, (_, i) => agent(`@pgb.sender${i}`)));
      const recipients = await Promise.all(Array.from({ length: RECIPIENTS }, (_, i) => agent(`@pgb.inbox${i}`)));
      for (const recipient of recipients) {
        const listener = new ResumingClient(() => [nodes[2].url], recipient.token);
        listeners.push(listener);
        await listener.start();
      }
      return new LoadTarget(label, checkUrl, nodes, apis, senders, recipients, listeners);
    } catch (error) {
      for (const listener of listeners) listener.stop();
      await stopAll(nodes, 3_000);
      throw error;
    }
  }

  /** A one-shot schedule to two recipients; the worker fires it through the same URL. */
  async schedule(at: number): Promise<void> {
    const [a, b] = this.recipients;
    const reply = await this.apis[1].post(
      '/schedules',
      {
        envelope: { to: [a.handle, b.handle], subject: 'scheduled', content_parts: [{ type: 'text', text: 'tick' }] },
        start_at: at,
      },
      this.senders[0].token,
    );
    expect(reply.status).toBe(201);
    this.scheduleId = reply.body.id as string;
  }

  /** CONCURRENCY closed-loop senders for `ms`: multi-recipient envelopes over both api nodes. */
  async drive(ms: number, measuring: boolean): Promise<void> {
    const deadline = Date.now() + ms;
    const started = performance.now();
    const sender = async () => {
      while (Date.now() < deadline) {
        const i = this.n++;
        const to = [this.recipients[i % RECIPIENTS].handle, this.recipients[(i + 1) % RECIPIENTS].handle];
        const cc = i % 2 === 0 ? [this.recipients[(i + 2) % RECIPIENTS].handle] : undefined;
        const body = {
          id: ulid(),
          to,
          ...(cc ? { cc } : {}),
          date_ms: Date.now(),
          subject: `load ${i}`,
          content_parts: [{ type: 'text', text: `message ${i} `.repeat(20) }],
        };
        let status = 0;
        const sentAt = performance.now();
        try {
          const reply = await this.apis[i % this.apis.length].post('/messages', body, this.senders[i % SENDERS].token);
          status = reply.status;
          if (status === 202) {
            this.expected.set(reply.body.id as string, [...to, ...(cc ?? [])]);
            if (measuring) this.latencies.push(performance.now() - sentAt);
          } else if (this.failures.length < 5) this.failures.push(`${status} ${reply.text}`);
        } catch (error) {
          if (this.failures.length < 5) this.failures.push(`no answer: ${(error as Error).message}`);
        }
        if (measuring || status !== 202) this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, sender));
    if (measuring) this.measuredMs += performance.now() - started;
  }

  /** Every 202 in Postgres once per recipient, the schedule fired once, every frame delivered. */
  async verify() {
    const [a, b] = this.recipients;
    let fired: any;
    for (const until = Date.now() + 30_000; ; await sleep(200)) {
      fired = (await this.apis[0].get(`/schedules/${this.scheduleId}`, this.senders[0].token)).body;
      if (fired.status !== 'active' || Date.now() > until) break;
    }
    expect(fired).toMatchObject({ status: 'completed', send_count: 1 });
    this.expected.set(fired.last_envelope_id as string, [a.handle, b.handle]);

    const check = new pg.Client({ connectionString: this.checkUrl });
    await check.connect();
    const stored = new Map<string, string[]>();
    let envelopeRows: number;
    try {
      const { rows } = await check.query<{ id: string; handle: string }>(
        `select m.envelope_id as id, a.handle from mailbox_entries m join agents a on a.id = m.mailbox_id
         where m.envelope_id = any($1::text[])`,
        [[...this.expected.keys()]],
      );
      for (const row of rows) stored.set(row.id, [...(stored.get(row.id) ?? []), row.handle]);
      envelopeRows = Number((await check.query<{ n: string }>('select count(*) as n from envelopes')).rows[0].n);
    } finally {
      await check.end();
    }
    const sorted = (handles: string[]) => JSON.stringify([...handles].sort());
    const wrong = [...this.expected].filter(([id, handles]) => sorted(stored.get(id) ?? []) !== sorted(handles));

    const frames = await Promise.allSettled(
      this.recipients.map((recipient, r) =>
        this.listeners[r].waitFor(
          [...this.expected].filter(([, handles]) => handles.includes(recipient.handle)).map(([id]) => id),
          30_000,
        ),
      ),
    );
    const framesMissing = frames
      .filter((result) => result.status === 'rejected')
      .map((result) => String(result.reason));
    const duplicateFrames = this.listeners.reduce((sum, listener) => sum + listener.duplicates, 0);

    const accepted = this.statuses.get(202) ?? 0;
    const failed = [...this.statuses].filter(([status]) => status !== 202).reduce((sum, [, count]) => sum + count, 0);
    this.latencies.sort((x, y) => x - y);
    const at = (p: number) =>
      Math.round(this.latencies[Math.min(this.latencies.length - 1, Math.floor(this.latencies.length * p))] ?? NaN);
    const figures = {
      run: this.label,
      timed_requests: [...this.statuses.values()].reduce((x, y) => x + y, 0),
      accepted,
      failed,
      by_status: Object.fromEntries(this.statuses),
      timed_s: Math.round(this.measuredMs / 100) / 10,
      accepted_per_s: Math.round((accepted / (this.measuredMs / 1000)) * 10) / 10,
      p50_ms: at(0.5),
      p99_ms: at(0.99),
      acknowledged_in_all: this.expected.size,
      envelope_rows: envelopeRows,
      not_durable_or_duplicated: wrong.length,
      frames_seen: this.listeners.reduce((sum, listener) => sum + listener.counts.size, 0),
      duplicate_frames: duplicateFrames,
    };
    const label = this.label;
    expect({ label, failures: this.failures, framesMissing, wrong: wrong.slice(0, 3) }).toEqual({
      label,
      failures: [],
      framesMissing: [],
      wrong: [],
    });
    if (failed > 0) throw new Error(`${label}: ${failed} requests not accepted\n${this.logs()}`);
    expect(accepted).toBeGreaterThan(0);
    // Nothing was written that was not acknowledged (a 5xx after a commit would show here).
    expect(envelopeRows).toBe(this.expected.size);
    expect(duplicateFrames).toBe(0);
    return figures;
  }

  logs(): string {
    return this.nodes.map((node) => `--- ${node.name}\n${node.output.join('\n')}`).join('\n');
  }

  async stop(): Promise<void> {
    for (const listener of this.listeners) listener.stop();
    await stopAll(this.nodes, 3_000);
  }
}
