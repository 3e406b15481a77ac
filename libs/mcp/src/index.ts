export * from './server';
export * from './watch';
export * from './errors';
