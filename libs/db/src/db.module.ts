import { Global, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { CONFIG, type Config } from '#config';
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
      ? await openPglite(config.dataDir, onQuery)
      : openPostgres({
          url: config.databaseUrl,
          poolSize: config.db.poolSize,
          statementTimeoutMs: config.db.statementTimeoutMs,
          applicationName: `roost-${config.role}`,
          onQuery,
        });
  await migrateWhenReachable(database, config.db.startupWaitMs);
  return database;
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
export class DbModule implements OnApplicationShutdown {
  constructor(@InjectDatabase() private readonly database: Database) {}

  async onApplicationShutdown(): Promise<void> {
    await this.database.close();
  }
}
