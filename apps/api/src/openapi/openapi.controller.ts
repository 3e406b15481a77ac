import { Controller, Get, Header } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { JSON_CONTENT_TYPE } from '#http';
import { buildOpenApiDocument } from './openapi.document';

/** `GET /openapi.json`: the OpenAPI 3.1 description (docs/openapi.md). Unauthenticated, no tenant data. */
@Controller()
export class OpenApiController {
  private document: string | undefined;

  constructor(@InjectConfig() private readonly config: Config) {}

  @Get('/openapi.json')
  @Header('content-type', JSON_CONTENT_TYPE)
  @Header('cache-control', 'public, max-age=300')
  openapi(): string {
    // Built once per process: it depends only on the schemas and the version.
    return (this.document ??= JSON.stringify(buildOpenApiDocument({ version: this.config.version })));
  }
}
