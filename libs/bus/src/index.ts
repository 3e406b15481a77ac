export * from './bus';
export * from './in-process.bus';
