import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger } from 'pino';
import type { Config } from '#config';
import { collectStartupGarbage, warmAcceptPath } from '#core';
import { RoostWsAdapter } from '#gateway';
import {
  AsmtpErrorFilter,
  createHttpAdapter,
  createLogger,
  observeRequests,
  PinoNestLogger,
  type HttpDrain,
} from '#http';
import { Metrics } from '#metrics';
import { RoostModule } from './roost.module';

export { DRAIN_HOLD_OPEN_MS } from '#http';

export interface RoostApp {
  app: NestFastifyApplication;
  logger: Logger;
  /** Refuse new WebSocket upgrades (the first step of a drain). */
  drainSockets(): void;
  /** Refuse new HTTP requests (503, Connection: close) and learn when the earlier ones are answered. */
  drain: HttpDrain;
  /**
   * Start the application (database, bus, queues: Nest's init), collect the start-up's garbage,
   * then listen on `config.port`/`config.host`. `npm start` and `roost serve` start this way.
   */
  listen(): Promise<void>;
}

/** Build (not yet listening) the application for `config`. Tests and main share this. */
export async function createRoostApp(config: Config): Promise<NestFastifyApplication> {
  return (await buildRoostApp(config)).app;
}

export async function buildRoostApp(config: Config, logger: Logger = createLogger(config)): Promise<RoostApp> {
  const { adapter, routes, drain } = createHttpAdapter({ requestTimeoutMs: config.http.requestTimeoutMs });
  const app = await NestFactory.create<NestFastifyApplication>(RoostModule.forRoot(config), adapter, {
    logger: config.logLevel === 'silent' ? false : new PinoNestLogger(logger),
    bodyParser: false,
    abortOnError: false,
  });
  observeRequests(adapter.getInstance(), logger, app.get(Metrics));
  app.useGlobalFilters(new AsmtpErrorFilter(routes, logger));
  let ws: RoostWsAdapter | undefined;
  if (config.role === 'all' || config.role === 'gateway') {
    ws = new RoostWsAdapter(app, config.gateway.maxClientFrameBytes, logger);
    app.useWebSocketAdapter(ws);
  }
  // What the first POST of a fresh process would compile or build (validators, the guard) is done
  // here, before it listens: its first senders do not wait for it.
  if (config.role === 'all' || config.role === 'api') warmAcceptPath();
  const listen = async () => {
    await app.init();
    const ms = collectStartupGarbage();
    logger.debug({ ms: ms === undefined ? null : Math.round(ms * 10) / 10 }, 'start-up garbage collected');
    // A deep accept queue: after a gateway restart thousands of clients reconnect at once.
    await app.listen({ port: config.port, host: config.host, backlog: 4096 });
  };
  return { app, logger, drainSockets: () => ws?.drain(), drain, listen };
}
