export { ApiModule } from './api.module';
export { buildOpenApiDocument, openApiOperations } from './openapi/openapi.document';
