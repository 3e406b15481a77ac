export * from './responses';
export * from './schemas';
export * from './openapi-schemas';
