import { Injectable } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import type { Schedule, ScheduleStatus } from '#domain';
import type { Database } from './database';
import type { DB } from './schema';
import { InjectDatabase } from './tokens';

const COLUMNS = [
  'id',
  'owner_id',
  'status',
  'envelope',
  'interval_ms',
  'next_run_at',
  'last_sent_at',
  'last_envelope_id',
  'send_count',
  'max_count',
  'end_at',
  'last_error',
  'created_at',
  'updated_at',
] as const;

export type NewSchedule = Omit<
  Schedule,
  'send_count' | 'last_sent_at' | 'last_envelope_id' | 'last_error' | 'updated_at'
>;

/** Schedules; every read of an agent's schedules names the owner (tenancy is a parameter). */
@Injectable()
export class SchedulesRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /** Insert unless the owner already has `quota` active or paused schedules; undefined then. */
  async create(schedule: NewSchedule, quota: number): Promise<Schedule | undefined> {
    return this.db.transaction().execute(async (trx) => {
      // Serialise concurrent creations of one owner so the quota cannot be overshot.
      await sql`select pg_advisory_xact_lock(${7_245_002}::int, ${schedule.owner_id}::int)`.execute(trx);
      const { count } = await trx
        .selectFrom('schedules')
        .select((eb) => eb.fn.countAll<number>().as('count'))
        .where('owner_id', '=', schedule.owner_id)
        .where('status', 'in', ['active', 'paused'])
        .executeTakeFirstOrThrow();
      if (Number(count) >= quota) return undefined;
      return trx
        .insertInto('schedules')
        .values({ ...schedule, updated_at: schedule.created_at })
        .returning(COLUMNS)
        .executeTakeFirstOrThrow();
    });
  }

  list(ownerId: number): Promise<Schedule[]> {
    return this.db
      .selectFrom('schedules')
      .select(COLUMNS)
      .where('owner_id', '=', ownerId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  find(ownerId: number, id: string): Promise<Schedule | undefined> {
    return this.db
      .selectFrom('schedules')
      .select(COLUMNS)
      .where('owner_id', '=', ownerId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  countLive(ownerId: number): Promise<number> {
    return this.db
      .selectFrom('schedules')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('owner_id', '=', ownerId)
      .where('status', 'in', ['active', 'paused'])
      .executeTakeFirstOrThrow()
      .then((row) => Number(row.count));
  }

  /** Move to `status` from one of `from`; undefined when the schedule is in another state. */
  setStatus(
    ownerId: number,
    id: string,
    status: ScheduleStatus,
    from: ScheduleStatus[],
    now: number,
  ): Promise<Schedule | undefined> {
    return this.db
      .updateTable('schedules')
      .set({ status, updated_at: now, ...(status === 'active' ? { last_error: null } : {}) })
      .where('owner_id', '=', ownerId)
      .where('id', '=', id)
      .where('status', 'in', from)
      .returning(COLUMNS)
      .executeTakeFirst();
  }

  /**
   * Lease up to `limit` due active schedules for `leaseMs` (SKIP LOCKED: workers never wait on each
   * other; an expired lease means its worker died and the run is taken over).
   */
  async claimDue(now: number, leaseMs: number, limit: number): Promise<Schedule[]> {
    const result = await sql<Schedule>`
      update schedules set lease_until = ${now + leaseMs}
      where id in (
        select id from schedules
        where status = 'active' and next_run_at <= ${now} and (lease_until is null or lease_until <= ${now})
        order by next_run_at
        limit ${limit}
        for update skip locked)
      returning ${sql.join(COLUMNS.map((c) => sql.ref(c)))}`.execute(this.db);
    return result.rows;
  }

  /**
   * Record run `run` (sent as `envelopeId`) unless another worker already did. A schedule paused or
   * cancelled meanwhile keeps its status; an active one completes when `completed`.
   */
  async recordRun(
    id: string,
    run: number,
    envelopeId: string,
    next: { next_run_at: number | null; completed: boolean },
    now: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('schedules')
      .set({
        send_count: run,
        last_sent_at: now,
        last_envelope_id: envelopeId,
        last_error: null,
        next_run_at: next.next_run_at,
        lease_until: null,
        updated_at: now,
        status: next.completed
          ? sql<ScheduleStatus>`case when status = 'active' then 'completed' else status end`
          : sql<ScheduleStatus>`status`,
      })
      .where('id', '=', id)
      .where('send_count', '=', run - 1)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** The accept path refused run `run`: the schedule fails with the reason. */
  async recordFailure(id: string, run: number, error: string, now: number): Promise<void> {
    await this.db
      .updateTable('schedules')
      .set({ status: 'failed', last_error: error, lease_until: null, updated_at: now })
      .where('id', '=', id)
      .where('send_count', '=', run - 1)
      .where('status', '=', 'active')
      .execute();
  }

  /** Shorten a lease after a transient failure: the schedule is retried from `retryAt`, not in the same tick. */
  async retryAt(id: string, retryAt: number): Promise<void> {
    await this.db.updateTable('schedules').set({ lease_until: retryAt }).where('id', '=', id).execute();
  }

  /** The oldest due `next_run_at` of active schedules (schedule lag), null when none is due. */
  async oldestDue(now: number): Promise<number | null> {
    const row = await this.db
      .selectFrom('schedules')
      .select((eb) => eb.fn.min('next_run_at').as('oldest'))
      .where('status', '=', 'active')
      .where('next_run_at', '<=', now)
      .executeTakeFirst();
    return row?.oldest == null ? null : Number(row.oldest);
  }
}
