export * from './responses';
export * from './schemas';
