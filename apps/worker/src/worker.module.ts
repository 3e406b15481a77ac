import { Module } from '@nestjs/common';
import { JobsModule } from '#jobs';
import { RetentionProcessor } from './retention.processor';
import { SchedulesProcessor } from './schedules.processor';
import { WorkerService } from './worker.service';

/** The worker role: BullMQ processors for schedules and retention. */
@Module({
  imports: [JobsModule],
  providers: [SchedulesProcessor, RetentionProcessor, WorkerService],
  exports: [SchedulesProcessor, RetentionProcessor],
})
export class WorkerModule {}
