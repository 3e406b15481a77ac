import { Global, Module } from '@nestjs/common';
import { AcceptBatcher } from './accept-batcher';
import { AcceptService } from './accept.service';
import { AuthService } from './auth.service';
import { Clock } from './clock';
import { AdminGuard, AgentGuard } from './guards';

/** Services more than one role needs: authentication and the accept path. */
@Global()
@Module({
  providers: [AuthService, AgentGuard, AdminGuard, AcceptBatcher, AcceptService, Clock],
  exports: [AuthService, AgentGuard, AdminGuard, AcceptBatcher, AcceptService, Clock],
})
export class CoreModule {}
