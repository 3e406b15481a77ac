import { Global, Logger, Module, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { sql } from 'kysely';
import { CONFIG, ConfigError, InjectConfig, type Config } from '#config';
import { isUnavailable } from '#domain';
import { Metrics } from '#metrics';
import { AgentsRepository } from './agents.repository';
import { openPglite, openPostgres, type Database } from './database';
import { EnvelopesRepository } from './envelopes.repository';
import { FilesRepository } from './files.repository';
import { MailboxRepository } from './mailbox.repository';
import { migrate } from './migrate';
import { OrgsRepository } from './orgs.repository';
import { ReceiptsRepository } from './receipts.repository';
import { RetentionRepository } from './retention.repository';
import { SchedulesRepository } from './schedules.repository';
import { SearchRepository } from './search.repository';
import { DATABASE, InjectDatabase } from './tokens';

const logger = new Logger('db');

const REPOSITORIES = [
  AgentsRepository,
  EnvelopesRepository,
  FilesRepository,
  MailboxRepository,
  OrgsRepository,
  SearchRepository,
  SchedulesRepository,
  RetentionRepository,
  ReceiptsRepository,
];

/** Postgres when DATABASE_URL is set, else PGlite under ROOST_DATA_DIR; migrated before use. */
export async function openDatabase(config: Config, metrics?: Metrics): Promise<Database> {
  const onQuery = metrics ? (ms: number) => metrics.dbQueryDuration.observe(ms / 1000) : undefined;
  const database =
    config.databaseUrl === null
      ? await openPglite(config.dataDir, onQuery, metrics ? (kind) => metrics.dbSyncs.inc({ kind }) : undefined)
      : openPostgres({
          url: config.databaseUrl,
          poolSize: config.db.poolSize,
          poolMin: config.db.poolMin,
          statementTimeoutMs: config.db.statementTimeoutMs,
          pooler: config.db.pooler,
          preparedStatements: config.db.preparedStatements,
          applicationName: `roost-${config.role}`,
          onQuery,
          onWarning: (message) => logger.error(message),
        });
  try {
    await migrateWhenReachable(database, config.db.startupWaitMs);
    if (database.kind === 'postgres') await checkStatementTimeout(database, config);
  } catch (error) {
    await database.close().catch(() => undefined);
    throw error;
  }
  return database;
}

/**
 * The statement timeout Postgres applies to this connection's single statements, against the one
 * configured. Without a pooler Roost sets it as a startup parameter, so a mismatch means a pooler
 * dropped it (PgBouncer's `ignore_startup_parameters`): such a pooler also loses named statements
 * between transactions, so start-up stops and says which setting is missing. Behind a transaction
 * pooler Roost's own transactions set it with `SET LOCAL`, but single statements run with the
 * server's default for the role: a warning when that is none or longer.
 */
async function checkStatementTimeout(database: Database, config: Config): Promise<void> {
  const { rows } = await sql<{
    setting: string;
  }>`select setting from pg_settings where name = 'statement_timeout'`.execute(database.db);
  const serverMs = Number(rows[0]?.setting);
  const wanted = config.db.statementTimeoutMs;
  if (config.db.pooler === 'none' && serverMs !== wanted) {
    throw new ConfigError(
      'ROOST_DB_POOLER',
      `Postgres reports statement_timeout ${serverMs} ms where Roost asked for ${wanted} ms at connect: DATABASE_URL ` +
        'goes through a pooler that drops startup parameters (PgBouncer ignore_startup_parameters?). Set ' +
        'ROOST_DB_POOLER=transaction for a transaction pooler (see docs/operations.md)',
    );
  }
  if (config.db.pooler === 'transaction' && (serverMs === 0 || serverMs > wanted)) {
    logger.warn(
      `behind the pooler, statements outside a transaction run with the role's statement_timeout (${serverMs === 0 ? 'none' : `${serverMs} ms`}), ` +
        `not ROOST_DB_STATEMENT_TIMEOUT_MS (${wanted} ms): set it for the role (ALTER ROLE ... SET statement_timeout = '${wanted}ms') ` +
        `or in the pooler's connect_query`,
    );
  }
}

/**
 * Migrate, waiting (with backoff) up to `waitMs` for a Postgres that is down or still starting, so
 * a process started during a database restart comes up by itself instead of exiting into an
 * orchestrator's growing restart back-off.
 */
async function migrateWhenReachable(database: Database, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      await migrate(database);
      return;
    } catch (error) {
      const message = (error as Error).message ?? '';
      if (/unsupported startup parameter/i.test(message)) {
        // PgBouncer refusing Roost's startup statement_timeout: waiting will not change that.
        throw new ConfigError(
          'ROOST_DB_POOLER',
          `Postgres refused the connection (${message}): DATABASE_URL goes through a pooler; set ROOST_DB_POOLER=transaction ` +
            'for a transaction pooler (see docs/operations.md)',
        );
      }
      if (!isUnavailable(error) || Date.now() + delay > deadline) throw error;
      logger.warn(`Postgres is not reachable yet (${(error as Error).message}); retrying in ${delay} ms`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

@Global()
@Module({
  providers: [{ provide: DATABASE, inject: [CONFIG, Metrics], useFactory: openDatabase }, ...REPOSITORIES],
  exports: [DATABASE, ...REPOSITORIES],
})
export class DbModule implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    @InjectDatabase() private readonly database: Database,
    private readonly agents: AgentsRepository,
    private readonly envelopes: EnvelopesRepository,
    @InjectConfig() private readonly config: Config,
  ) {}

  /**
   * Before the listener opens: `ROOST_DB_POOL_MIN` connections with the per-request statements
   * parsed and planned on each, so a fresh process's first requests do not queue behind connection
   * set-up. A failure here only costs that head start.
   */
  async onApplicationBootstrap(): Promise<void> {
    const accepts = this.config.role === 'all' || this.config.role === 'api';
    const statements = [...this.agents.warmStatements(), ...(accepts ? this.envelopes.warmStatements() : [])];
    await this.database.warm(statements, this.config.db.poolMin).catch((error: unknown) => {
      logger.warn(`warming the database connections failed: ${(error as Error).message}`);
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.database.close();
  }
}
