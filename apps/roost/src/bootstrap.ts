import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Config } from '#config';
import { AuthService } from '#core';
import { AsmtpErrorFilter, createHttpAdapter } from '#http';
import { RoostWsAdapter } from '../../gateway/src/ws-adapter';
import { RoostModule } from './roost.module';

/** Build (not yet listening) the Nest application for `config`. Tests and main share this. */
export async function createRoostApp(config: Config): Promise<NestFastifyApplication> {
  const { adapter, routes } = createHttpAdapter({ requestTimeoutMs: config.http.requestTimeoutMs });
  const app = await NestFactory.create<NestFastifyApplication>(RoostModule.forRoot(config), adapter, {
    logger: config.logLevel === 'silent' ? false : ['error', 'warn'],
    bodyParser: false,
    abortOnError: false,
  });
  app.useGlobalFilters(new AsmtpErrorFilter(routes));
  if (config.role === 'all' || config.role === 'gateway') {
    app.useWebSocketAdapter(new RoostWsAdapter(app, app.get(AuthService), config.gateway.maxClientFrameBytes));
  }
  app.enableShutdownHooks();
  return app;
}
