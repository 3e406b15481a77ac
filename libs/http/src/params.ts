import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { parseQueryString, type QueryPairs } from '#domain';
import { jsonBody, rawQuery } from './body';

/** The body parsed as a JSON object (after the guards ran: auth comes before body errors). */
export const JsonBody = createParamDecorator((_data: unknown, context: ExecutionContext): Record<string, unknown> =>
  jsonBody(context.switchToHttp().getRequest<FastifyRequest>()),
);

/** The raw query as ordered pairs (first occurrence wins; `ids` splits on unencoded commas). */
export const Query = createParamDecorator((_data: unknown, context: ExecutionContext): QueryPairs =>
  parseQueryString(rawQuery(context.switchToHttp().getRequest<FastifyRequest>())),
);

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
