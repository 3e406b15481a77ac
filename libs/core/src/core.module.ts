import { Global, Module } from '@nestjs/common';
import { AcceptBatcher } from './accept-batcher';
import { AcceptService } from './accept.service';
import { AuthFailLimiter } from './auth-fail-limiter';
import { AuthService } from './auth.service';
import { Clock } from './clock';
import { ContentGuard } from './content-guard';
import { RateLimiter } from './rate-limiter';

/** Services more than one role needs: authentication and the accept path. */
@Global()
@Module({
  providers: [AuthService, AcceptBatcher, AcceptService, Clock, RateLimiter, ContentGuard, AuthFailLimiter],
  exports: [AuthService, AcceptBatcher, AcceptService, Clock, RateLimiter, ContentGuard, AuthFailLimiter],
})
export class CoreModule {}
