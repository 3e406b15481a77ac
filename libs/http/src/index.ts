export * from './async-resource-bind';
export * from './body';
export * from './errors.filter';
export * from './http-adapter';
export * from './logging';
export * from './params';
export * from './routes';
