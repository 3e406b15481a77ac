export * from './agents';
export * from './envelope';
export * from './errors';
export * from './files';
export * from './handles';
export * from './ids';
export * from './query';
export * from './tokens';
