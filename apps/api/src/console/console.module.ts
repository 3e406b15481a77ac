import { Injectable, Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { registerConsole } from './console.routes';

/** Registers the console's routes on the api node's Fastify instance (see console.routes.ts). */
@Injectable()
export class ConsoleRoutes implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit(): void {
    registerConsole(this.adapterHost.httpAdapter.getInstance<FastifyInstance>());
  }
}

/** The web console (`/console`), served by every api node. */
@Module({ providers: [ConsoleRoutes] })
export class ConsoleModule {}
