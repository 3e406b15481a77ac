export * from './types';
export * from './http';
export * from './ulid';
export * from './cursor';
export * from './client';
export * from './listener';
export * from './triage';
export * from './render';
