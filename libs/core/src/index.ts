export * from './accept-batcher';
export * from './accept.service';
export * from './auth.service';
export * from './clock';
export * from './core.module';
export * from './envelope-input';
export * from './guards';
export * from './rate-limiter';
