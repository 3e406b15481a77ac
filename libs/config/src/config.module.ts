import { Global, Inject, Module, type DynamicModule } from '@nestjs/common';
import type { Config } from './config';

export const CONFIG = Symbol('CONFIG');
export const InjectConfig = () => Inject(CONFIG);

/** Provides the one validated `Config` object to every module of the process. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: Config): DynamicModule {
    return { module: ConfigModule, providers: [{ provide: CONFIG, useValue: config }], exports: [CONFIG] };
  }
}
