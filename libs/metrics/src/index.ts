export * from './metrics';
export * from './metrics.module';
export * from './lean-histogram';
export * from './lean-counter';
