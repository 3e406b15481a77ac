export * from './bus';
export * from './bus.module';
export * from './in-process.bus';
export * from './redis-streams.bus';
