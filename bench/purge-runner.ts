import 'reflect-metadata';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { BusModule } from '#bus';
import { ConfigModule, loadConfig, type Config } from '#config';
import { DbModule } from '#db';
import { MetricsModule } from '#metrics';
import { RetentionProcessor } from '../apps/worker/src/retention.processor';

/**
 * One retention purge in its own process, as a worker runs it: the worker's `RetentionProcessor`
 * over the product's repositories and config (ROOST_RETENTION_BATCH etc.), without the job timer.
 * Prints `{"entries","envelopes","seconds"}` as one JSON line.
 */
@Module({})
class PurgeModule {
  static forRoot(config: Config): DynamicModule {
    return {
      module: PurgeModule,
      imports: [ConfigModule.forRoot(config), MetricsModule, DbModule, BusModule],
      providers: [RetentionProcessor],
    };
  }
}

async function main(): Promise<void> {
  const config = loadConfig();
  const app = await NestFactory.createApplicationContext(PurgeModule.forRoot(config), { logger: ['error', 'warn'] });
  const t0 = performance.now();
  const purged = await app.get(RetentionProcessor).purge();
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(`${JSON.stringify({ ...purged, seconds })}\n`);
  await app.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`purge failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
