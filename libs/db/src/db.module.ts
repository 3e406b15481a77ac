import { Global, Module, type OnApplicationShutdown } from '@nestjs/common';
import { CONFIG, type Config } from '#config';
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
  await migrate(database);
  return database;
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
