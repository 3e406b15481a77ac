import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { ApiModule } from '#api';
import { BusModule } from '#bus';
import { ConfigModule, type Config, type Role } from '#config';
import { CoreModule } from '#core';
import { DbModule } from '#db';
import { GatewayModule } from '#gateway';
import { MetricsModule } from '#metrics';
import { WorkerModule } from '#worker';
import { MetricsListener } from './ops/metrics.listener';
import { MetricsController, OpsController } from './ops/ops.controller';
import { OpsService } from './ops/ops.service';

const ROLE_MODULES: Record<Exclude<Role, 'all'>, Type[]> = {
  api: [ApiModule],
  gateway: [GatewayModule],
  worker: [WorkerModule],
};

export function roleModules(role: Role): Type[] {
  return role === 'all' ? Object.values(ROLE_MODULES).flat() : ROLE_MODULES[role];
}

/**
 * The process root: shared infrastructure plus the modules of the role `ROOST_ROLE` names. This is
 * the one place that composes the apps (DESIGN.md: one image, the role chosen at start).
 */
@Module({})
export class RoostModule {
  static forRoot(config: Config): DynamicModule {
    return {
      module: RoostModule,
      imports: [
        ConfigModule.forRoot(config),
        MetricsModule,
        DbModule,
        BusModule,
        CoreModule,
        ...roleModules(config.role),
      ],
      // /metrics on the main port only when no metrics listener is configured.
      controllers: config.metricsPort === 0 ? [OpsController, MetricsController] : [OpsController],
      providers: [OpsService, MetricsListener],
    };
  }
}
