import { Module } from '@nestjs/common';
import { AdminAgentsController, AdminOrgsController } from './admin/admin.controller';
import { AdminService } from './admin/admin.service';
import { AgentsController } from './agents/agents.controller';
import { AgentsService } from './agents/agents.service';
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
import { ReceiptsController } from './receipts/receipts.controller';
import { ReceiptsService } from './receipts/receipts.service';
import { SchedulesController } from './schedules/schedules.controller';
import { SchedulesService } from './schedules/schedules.service';
import { SearchController } from './search/search.controller';
import { SearchService } from './search/search.service';

/** The api role: the ASMTP REST surface and Roost's REST extensions. */
@Module({
  controllers: [
    MessagesController,
    MailboxController,
    AgentsController,
    FilesController,
    SearchController,
    SchedulesController,
    ReceiptsController,
    AdminAgentsController,
    AdminOrgsController,
    McpController,
    OpenApiController,
  ],
  providers: [MessagesService, MailboxService, AgentsService, FilesService, SearchService, AdminService, SchedulesService, ReceiptsService, McpService, MailWatchService],
})
export class ApiModule {}
