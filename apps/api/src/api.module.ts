import { Module } from '@nestjs/common';
import { CONFIG, type Config } from '#config';
import { JobQueueStats } from '#jobs';
import { AdminReadInterceptor } from './admin/admin-access';
import { AdminAgentsController, AdminOrgsController } from './admin/admin.controller';
import { AdminService } from './admin/admin.service';
import { AdminConsoleController } from './admin/console.controller';
import { ConsoleRepository } from './admin/console.repository';
import { ConsoleService } from './admin/console.service';
import { EventsService } from './admin/events.service';
import { AdminReadsController } from './admin/reads.controller';
import { ReadsService } from './admin/reads.service';
import { AgentsController } from './agents/agents.controller';
import { AgentsService } from './agents/agents.service';
import { AdminGuard, AgentGuard } from './auth/guards';
import { ConsoleModule } from './console/console.module';
import { FilesController } from './files/files.controller';
import { FilesService } from './files/files.service';
import { MailboxController } from './mailbox/mailbox.controller';
import { MailboxService } from './mailbox/mailbox.service';
import { MailWatchService } from './mcp/mail-watch.service';
import { McpController } from './mcp/mcp.controller';
import { McpService } from './mcp/mcp.service';
import { OpenApiController } from './openapi/openapi.controller';
import { MessagesController } from './messages/messages.controller';
import { MessagesService } from './messages/messages.service';
import { SendRoute } from './messages/send.route';
import { ReceiptsController } from './receipts/receipts.controller';
import { ReceiptsService } from './receipts/receipts.service';
import { SchedulesController } from './schedules/schedules.controller';
import { SchedulesService } from './schedules/schedules.service';
import { SearchController } from './search/search.controller';
import { SearchService } from './search/search.service';

/** The api role: the ASMTP REST surface and Roost's REST extensions. */
@Module({
  imports: [ConsoleModule],
  controllers: [
    MessagesController,
    MailboxController,
    AgentsController,
    FilesController,
    SearchController,
    SchedulesController,
    ReceiptsController,
    AdminAgentsController,
    AdminReadsController,
    AdminConsoleController,
    AdminOrgsController,
    McpController,
    OpenApiController,
  ],
  providers: [
    AgentGuard,
    SendRoute,
    AdminGuard,
    MessagesService,
    MailboxService,
    AgentsService,
    FilesService,
    SearchService,
    AdminService,
    SchedulesService,
    ReceiptsService,
    McpService,
    MailWatchService,
    ConsoleRepository,
    ConsoleService,
    ReadsService,
    EventsService,
    AdminReadInterceptor,
    // The job queue's backlog for the console; none when embedded (jobs run on in-process timers).
    {
      provide: JobQueueStats,
      inject: [CONFIG],
      useFactory: (config: Config) =>
        config.redisUrl === null ? null : new JobQueueStats({ url: config.redisUrl, prefix: config.redisPrefix }),
    },
  ],
})
export class ApiModule {}
