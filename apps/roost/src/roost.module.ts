import { Module, type DynamicModule } from '@nestjs/common';
import { ApiModule } from '../../api/src/api.module';
import { FrameBus, InProcessFrameBus } from '#bus';
import { ConfigModule, type Config } from '#config';
import { CoreModule } from '#core';
import { DbModule } from '#db';

/**
 * The process root: the roles `ROOST_ROLE` names, over the shared infrastructure modules. This is
 * the one place that composes the apps (DESIGN.md: one image, role chosen at start).
 */
@Module({})
export class RoostModule {
  static forRoot(config: Config): DynamicModule {
    return {
      module: RoostModule,
      global: true,
      imports: [ConfigModule.forRoot(config), DbModule, CoreModule, ApiModule],
      providers: [InProcessFrameBus, { provide: FrameBus, useExisting: InProcessFrameBus }],
      exports: [FrameBus, InProcessFrameBus],
    };
  }
}
