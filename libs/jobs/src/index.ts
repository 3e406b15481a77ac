export * from './bullmq.runner';
export * from './in-process.runner';
export * from './jobs';
export * from './jobs.module';
export * from './queue-stats';
