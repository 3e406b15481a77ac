import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { sql } from 'kysely';
import pg from 'pg';
import {
  EnvelopesRepository,
  loadMigrations,
  migrate,
  openPostgres,
  type Database,
  type EntryRow,
  type EnvelopeRow,
} from '#db';
import { ulid } from '#domain';
import { TEXT } from './accept';
import { round, scratchDatabase } from './support';
import type { ScratchDatabase } from './database';

const AGENTS = 2_000;
/**
 * `fanout` (default): envelopes to 50 recipients each, as the fanout bench sends. `accept`: as the
 * accept bench sends: each envelope to one recipient, the same hot mailbox, with its ~1 KB text.
 */
const SHAPE = process.env.ROOST_BENCH_SHAPE === 'accept' ? 'accept' : 'fanout';
const PER_ENVELOPE = SHAPE === 'accept' ? 1 : 50;
const GROUPS = SHAPE === 'accept' ? 1 : AGENTS / PER_ENVELOPE;

/**
 * A schema variant: DDL run on its own scratch database after the migrations, and whether the
 * statement advances `mailboxes` and indexes text.
 */
interface Variant {
  name: string;
  /** Statements run on a migrated database; a function is called when the variant is set up. */
  ddl: Array<string | (() => string)>;
  advance?: boolean;
  searchText?: boolean;
  /**
   * Index the text with Postgres's parser (`to_tsvector`), as before the api node worked out the
   * lexemes of plain texts: one non-ASCII word appended makes the text not plain.
   */
  parser?: boolean;
}

/** Back to the schema of migrations 0001–0006: the row-level foreign keys of mailbox_entries, no 0007 triggers. */
const SCHEMA_0006 = [
  'DROP TRIGGER mailbox_entries_check_parents ON mailbox_entries',
  'DROP TRIGGER envelopes_delete_entries ON envelopes',
  'DROP TRIGGER mailboxes_delete_entries ON mailboxes',
  'ALTER TABLE mailbox_entries ADD CONSTRAINT mailbox_entries_mailbox_id_fkey FOREIGN KEY (mailbox_id) REFERENCES mailboxes (agent_id) ON DELETE CASCADE',
  'ALTER TABLE mailbox_entries ADD CONSTRAINT mailbox_entries_envelope_id_fkey FOREIGN KEY (envelope_id) REFERENCES envelopes (id) ON DELETE CASCADE',
];
/** A migration's SQL, read from the migrations folder. */
function migrationSql(version: string): string {
  const migration = loadMigrations().find((m) => m.version === version);
  if (!migration) throw new Error(`migration ${version} not found`);
  return migration.sql;
}

/** The `roost_entries_check_parents()` a migration creates, as a `CREATE OR REPLACE` statement. */
function parentCheckOf(version: string): string {
  const statement = /CREATE (?:OR REPLACE )?FUNCTION roost_entries_check_parents\(\)[\s\S]*?\$\$;/.exec(
    migrationSql(version),
  )?.[0];
  if (!statement) throw new Error(`${version}: roost_entries_check_parents not found`);
  return statement.replace(/^CREATE FUNCTION/, 'CREATE OR REPLACE FUNCTION').replace(/;$/, '');
}

/**
 * Back to migration 0007's parent check (no lock on the parents, plans that may scan; replaced by
 * 0008), read from the migration itself.
 */
const check0007 = (): string => parentCheckOf('0007_entries_without_row_fks');

/** One parent count of 0008's check: `(SELECT count(*) FROM (SELECT FROM t WHERE k = ANY (ids) FOR KEY SHARE) AS held)`. */
const LOCKED_COUNT =
  /\(SELECT count\(\*\) FROM \(SELECT FROM (\w+) WHERE (\w+) = ANY \((\w+)\) FOR KEY SHARE\) AS held\)/g;

/**
 * The current parent check (0008's function) with its locks changed: none at all, or only on rows
 * this transaction did not write (its own counted by `xmin`). Run `genericPlans` after it.
 */
function check0008(lock: 'none' | 'others'): string {
  const locked = parentCheckOf('0008_entries_parent_check_locks');
  const counts = locked.match(LOCKED_COUNT)?.length ?? 0;
  if (counts !== 2) throw new Error(`0008: expected 2 locked parent counts, found ${counts}`);
  return locked.replace(LOCKED_COUNT, (_all, table: string, key: string, ids: string) => {
    const own = 'xmin = pg_current_xact_id()::xid';
    if (lock === 'none') return `(SELECT count(*) FROM ${table} WHERE ${key} = ANY (${ids}))`;
    return (
      `((SELECT count(*) FROM ${table} WHERE ${key} = ANY (${ids}) AND ${own}) + ` +
      `(SELECT count(*) FROM (SELECT FROM ${table} WHERE ${key} = ANY (${ids}) AND NOT ${own} FOR KEY SHARE) AS held))`
    );
  });
}

/** Migration 0010 again: replacing the check's function drops its `plan_cache_mode` setting. */
const genericPlans = (): string => migrationSql('0010_parent_check_generic_plans');

const DROP_FK_MAILBOX = 'ALTER TABLE mailbox_entries DROP CONSTRAINT mailbox_entries_mailbox_id_fkey';
const DROP_FK_ENVELOPE = 'ALTER TABLE mailbox_entries DROP CONSTRAINT mailbox_entries_envelope_id_fkey';
const DROP_FK_SENDER = 'ALTER TABLE envelopes DROP CONSTRAINT envelopes_sender_id_fkey';
const DROP_FK_RECEIPT = 'ALTER TABLE envelopes DROP CONSTRAINT envelopes_receipt_for_fkey';

/** `as_0006` and what each of its parts costs (`0006_no_…`: that part removed), then the current schema. */
const VARIANTS: Variant[] = [
  { name: 'as_0006', ddl: SCHEMA_0006 },
  { name: '0006_no_entry_fks', ddl: [...SCHEMA_0006, DROP_FK_MAILBOX, DROP_FK_ENVELOPE] },
  { name: '0006_no_fk_mailbox', ddl: [...SCHEMA_0006, DROP_FK_MAILBOX] },
  { name: '0006_no_fk_envelope', ddl: [...SCHEMA_0006, DROP_FK_ENVELOPE] },
  { name: '0006_no_feed_index', ddl: [...SCHEMA_0006, 'DROP INDEX mailbox_entries_feed'] },
  { name: '0006_no_unread_index', ddl: [...SCHEMA_0006, 'DROP INDEX mailbox_entries_unread'] },
  { name: '0006_no_envelope_index', ddl: [...SCHEMA_0006, 'DROP INDEX mailbox_entries_envelope'] },
  { name: '0006_no_search_gin', ddl: [...SCHEMA_0006, 'DROP INDEX envelopes_search'] },
  { name: '0006_no_search_text', ddl: SCHEMA_0006, searchText: false },
  { name: '0006_no_mailboxes_update', ddl: SCHEMA_0006, advance: false },
  {
    name: '0006_entries_pk_only',
    ddl: [
      ...SCHEMA_0006,
      DROP_FK_MAILBOX,
      DROP_FK_ENVELOPE,
      'DROP INDEX mailbox_entries_feed',
      'DROP INDEX mailbox_entries_unread',
      'DROP INDEX mailbox_entries_envelope',
    ],
  },
  { name: 'as_migrated', ddl: [] },
  { name: 'migrated_check_as_0007', ddl: [check0007] },
  { name: 'migrated_no_parent_check', ddl: ['DROP TRIGGER mailbox_entries_check_parents ON mailbox_entries'] },
  { name: 'migrated_no_search_text', ddl: [], searchText: false },
  { name: 'migrated_parser', ddl: [], parser: true },
  { name: 'migrated_no_search_gin', ddl: ['DROP INDEX envelopes_search'] },
  { name: 'migrated_gin_fastupdate_off', ddl: ['ALTER INDEX envelopes_search SET (fastupdate = off)'] },
  { name: 'migrated_no_sender_feed', ddl: ['DROP INDEX envelopes_sender_feed'] },
  {
    // Back to pglz, as before migration 0011.
    name: 'migrated_pglz',
    ddl: [
      'ALTER TABLE envelopes ALTER COLUMN body SET COMPRESSION pglz, ALTER COLUMN header SET COMPRESSION pglz, ' +
        'ALTER COLUMN search SET COMPRESSION pglz',
    ],
  },
  { name: 'migrated_check_no_locks', ddl: [() => check0008('none'), genericPlans] },
  { name: 'migrated_check_own_rows_unlocked', ddl: [() => check0008('others'), genericPlans] },
  { name: 'migrated_no_sender_fk', ddl: [DROP_FK_SENDER] },
  { name: 'migrated_no_receipt_fk', ddl: [DROP_FK_RECEIPT] },
  { name: 'migrated_no_envelope_fks', ddl: [DROP_FK_SENDER, DROP_FK_RECEIPT] },
  {
    name: 'migrated_entries_pk_only',
    ddl: [
      'DROP INDEX mailbox_entries_feed',
      'DROP INDEX mailbox_entries_unread',
      'DROP INDEX mailbox_entries_envelope',
    ],
  },
];

/** Nanoseconds a process has run on a CPU (first field of /proc/<pid>/schedstat). */
function runNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

/**
 * Sequential scans of `envelopes` so far (this backend's pending counts flushed first), and how
 * many times autovacuum analyzed it (which makes plpgsql plan the parent check again).
 */
async function envelopeStats(database: Database): Promise<{ seqScans: number; autoanalyzed: number }> {
  await sql`select pg_stat_force_next_flush()`.execute(database.db);
  const result = await sql<{ n: string; a: string }>`
    select seq_scan as n, autoanalyze_count as a from pg_stat_user_tables where relname = 'envelopes'`.execute(
    database.db,
  );
  return { seqScans: Number(result.rows[0].n), autoanalyzed: Number(result.rows[0].a) };
}

/**
 * How Postgres planned the accept statement on the pool's one connection so far: a custom plan is
 * planned again at every execution, a generic one once (`plan_cache_mode` auto picks per statement).
 */
async function planCounts(database: Database): Promise<{ generic: number; custom: number }> {
  const result = await sql<{ g: string; c: string }>`
    select generic_plans as g, custom_plans as c from pg_prepared_statements
    where name = 'roost_accept_if_current'`.execute(database.db);
  const row = result.rows[0];
  return { generic: Number(row?.g ?? 0), custom: Number(row?.c ?? 0) };
}

/** The pid of the backend serving the pool's one connection. */
async function backendPid(database: Database): Promise<number> {
  return (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db)).rows[0].pid;
}

interface Target {
  variant: Variant;
  scratch: ScratchDatabase;
  database: Database;
  repo: EnvelopesRepository;
  senderId: number;
  mailboxIds: number[];
  handles: string[];
  lastSeq: Map<number, number>;
  lastCreatedAt: number;
  cpuNs: number;
  statsBefore: { seqScans: number; autoanalyzed: number };
  envelopeSeqScans: number;
  envelopeAutoanalyzed: number;
  plans: { generic: number; custom: number };
  rows: number;
  envelopes: number;
  statements: number;
  wallMs: number;
}

async function setUp(variant: Variant): Promise<Target> {
  const scratch = await scratchDatabase('roost_bench_stmt');
  const database = openPostgres({ url: scratch.url, poolSize: 1, poolMin: 1, statementTimeoutMs: 60_000 });
  await migrate(database);
  const admin = new pg.Client({ connectionString: scratch.url });
  await admin.connect();
  try {
    const handles = Array.from({ length: AGENTS }, (_, i) => `@bench.f${String(i).padStart(4, '0')}`);
    const now = Date.now();
    const inserted = await admin.query<{ id: string; handle: string }>(
      `INSERT INTO agents (handle, owner, token_hash, policy, display_name, visibility, created_at, updated_at)
       SELECT h, 'bench', md5(h), 'open', h, 'public', $2, $2 FROM unnest($1::text[]) AS h
       RETURNING id, handle`,
      [[...handles, '@bench.sender'], now],
    );
    await admin.query('INSERT INTO mailboxes (agent_id) SELECT id FROM agents');
    for (const statement of variant.ddl) await admin.query(typeof statement === 'string' ? statement : statement());
    // A young database whose plans are never made again: no autovacuum ANALYZE of the growing tables.
    if (process.env.ROOST_BENCH_NO_AUTOANALYZE === '1') {
      for (const table of ['envelopes', 'mailboxes', 'mailbox_entries']) {
        await admin.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
      }
    }
    await admin.query('VACUUM ANALYZE');
    const byHandle = new Map(inserted.rows.map((row) => [row.handle, Number(row.id)]));
    return {
      variant,
      scratch,
      database,
      repo: new EnvelopesRepository(database),
      senderId: byHandle.get('@bench.sender')!,
      mailboxIds: handles.map((h) => byHandle.get(h)!),
      handles,
      lastSeq: new Map(),
      lastCreatedAt: 0,
      cpuNs: 0,
      statsBefore: { seqScans: 0, autoanalyzed: 0 },
      plans: { generic: 0, custom: 0 },
      envelopeSeqScans: 0,
      envelopeAutoanalyzed: 0,
      rows: 0,
      envelopes: 0,
      statements: 0,
      wallMs: 0,
    };
  } finally {
    await admin.end();
  }
}

/** One accept statement: `batch` envelopes, each to the 50 agents of the next group (as the fanout bench sends). */
async function acceptOnce(target: Target, batch: number, counter: { n: number }): Promise<void> {
  const createdAt = Math.max(Date.now(), target.lastCreatedAt + 1);
  target.lastCreatedAt = createdAt;
  const envelopes: EnvelopeRow[] = [];
  const entries: EntryRow[] = [];
  const states = new Map<number, { agent_id: number; last_seq: number; last_created_at: number }>();
  const expected = new Map<number, number>();
  for (let e = 0; e < batch; e++) {
    const i = counter.n++;
    const group = i % GROUPS;
    const id = ulid();
    const to = target.handles.slice(group * PER_ENVELOPE, (group + 1) * PER_ENVELOPE);
    const subject = `fanout ${i}`;
    const text = SHAPE === 'accept' ? `${TEXT} ${i}` : `fanout bench envelope ${i}`;
    const body = JSON.stringify({ id, to, date_ms: createdAt, subject, content_parts: [{ type: 'text', text }] });
    const header = JSON.stringify({
      id,
      from: '@bench.sender',
      to,
      date_ms: createdAt,
      subject,
      created_at: createdAt,
    });
    envelopes.push({
      id,
      sender_id: target.senderId,
      created_at: createdAt,
      received_ms: createdAt,
      body,
      header,
      recipients: to,
      self_addressed: false,
      search_text:
        target.variant.searchText === false ? '' : `${subject} ${text}${target.variant.parser ? ' café' : ''}`,
      receipt_for: null,
      receipt_status: null,
      guard_override: null,
    });
    for (let r = 0; r < PER_ENVELOPE; r++) {
      const mailbox = target.mailboxIds[group * PER_ENVELOPE + r];
      const before = target.lastSeq.get(mailbox) ?? 0;
      if (!expected.has(mailbox)) expected.set(mailbox, before);
      const seq = before + 1;
      target.lastSeq.set(mailbox, seq);
      states.set(mailbox, { agent_id: mailbox, last_seq: seq, last_created_at: createdAt });
      entries.push({ mailbox_id: mailbox, seq, envelope_id: id, created_at: createdAt, kind: 'to' });
    }
  }
  const advance = target.variant.advance !== false;
  const stateList = advance ? [...states.values()] : [];
  const outcome = await target.repo.insertAllIfCurrent(
    envelopes,
    entries,
    stateList,
    stateList.map((s) => expected.get(s.agent_id)!),
  );
  if (outcome !== 'written') throw new Error(`accept statement: ${outcome}`);
  target.rows += entries.length;
  target.envelopes += batch;
  target.statements++;
}

/**
 * `accept-statement`: the accept path's one statement (`roost_accept_if_current`, what an api node
 * runs for a batch) alone, run back to back on one connection per schema variant, for envelopes to
 * 50 recipients each (`ROOST_BENCH_BATCH` envelopes per statement, default 8), measuring the
 * Postgres backend's CPU from /proc/<pid>/schedstat: µs per mailbox entry row (= per delivered
 * frame). Each variant has its own scratch database, set up alike; the variants run in alternating
 * rounds (forward, then reversed) of ROOST_BENCH_WINDOW_SECONDS (default 2) each, ROOST_BENCH_ROUNDS
 * (default 6) rounds, so that a drifting machine weighs on all alike. ROOST_BENCH_VARIANTS (comma
 * list) picks variants. ROOST_BENCH_NO_AUTOANALYZE=1 turns autovacuum off on the written tables, so
 * plans made on the young (just set up) database stay in use as they grow.
 */
export async function acceptStatementScenario(): Promise<Record<string, unknown>> {
  const batch = Number(process.env.ROOST_BENCH_BATCH ?? 8);
  const windowMs = Number(process.env.ROOST_BENCH_WINDOW_SECONDS ?? 2) * 1000;
  const rounds = Number(process.env.ROOST_BENCH_ROUNDS ?? 6);
  const picked = process.env.ROOST_BENCH_VARIANTS?.split(',');
  const variants = picked ? VARIANTS.filter((v) => picked.includes(v.name)) : VARIANTS;
  const load_before = round(loadavg()[0]);
  const targets: Target[] = [];
  try {
    for (const variant of variants) targets.push(await setUp(variant));
    const counter = { n: 0 };
    // Warm-up: plans, caches, the first pages of every index.
    for (const target of targets) for (let i = 0; i < 20; i++) await acceptOnce(target, batch, counter);
    for (const target of targets) Object.assign(target, { cpuNs: 0, rows: 0, envelopes: 0, statements: 0, wallMs: 0 });
    for (const target of targets) target.statsBefore = await envelopeStats(target.database);
    for (let r = 0; r < rounds; r++) {
      for (const target of r % 2 === 0 ? targets : [...targets].reverse()) {
        const pid = await backendPid(target.database);
        const cpuBefore = runNs(pid);
        const start = performance.now();
        while (performance.now() - start < windowMs) await acceptOnce(target, batch, counter);
        target.wallMs += performance.now() - start;
        target.cpuNs += runNs(pid) - cpuBefore;
        if ((await backendPid(target.database)) !== pid) throw new Error(`${target.variant.name}: the backend changed`);
      }
    }
    for (const target of targets) {
      const after = await envelopeStats(target.database);
      target.envelopeSeqScans = after.seqScans - target.statsBefore.seqScans;
      target.envelopeAutoanalyzed = after.autoanalyzed - target.statsBefore.autoanalyzed;
      target.plans = await planCounts(target.database);
    }
    // The parent check's own cost: a variant against the same schema without the check's trigger.
    const unchecked = targets.find((t) => t.variant.name === 'migrated_no_parent_check');
    const uncheckedPerRow = unchecked ? unchecked.cpuNs / unchecked.rows / 1000 : undefined;
    const base = targets[0].cpuNs / targets[0].rows / 1000;
    const first = targets[0].variant.name;
    return {
      scenario: 'accept-statement',
      statement: 'roost_accept_if_current',
      shape: SHAPE,
      recipients_per_envelope: PER_ENVELOPE,
      envelopes_per_statement: batch,
      rows_per_statement: batch * PER_ENVELOPE,
      rounds,
      window_s: windowMs / 1000,
      variants: Object.fromEntries(
        targets.map((t) => {
          const perRow = t.cpuNs / t.rows / 1000;
          return [
            t.variant.name,
            {
              backend_cpu_us_per_row: round(perRow, 2),
              [`vs_${first}`]: round(perRow / base, 3),
              backend_cpu_ms_per_statement: round(t.cpuNs / t.statements / 1e6, 3),
              rows_per_s_one_backend: round(t.rows / (t.wallMs / 1000), 0),
              backend_cpu_pct_of_wall: round((t.cpuNs / 1e6 / t.wallMs) * 100, 0),
              rows: t.rows,
              statements: t.statements,
              envelopes_seq_scans: t.envelopeSeqScans,
              envelopes_autoanalyzed: t.envelopeAutoanalyzed,
              generic_plans: t.plans.generic,
              custom_plans: t.plans.custom,
              ...(uncheckedPerRow !== undefined &&
              (t.variant.name === 'as_migrated' || t.variant.name.startsWith('migrated_')) &&
              t !== unchecked
                ? { parent_check_us_per_row: round(perRow - uncheckedPerRow, 2) }
                : {}),
            },
          ];
        }),
      ),
      load_1m_before: load_before,
      load_1m_after: round(loadavg()[0]),
    };
  } finally {
    for (const target of targets) {
      await target.database.close();
      await target.scratch.drop();
    }
  }
}
