export * from './roost-container';
