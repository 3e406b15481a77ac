import { Inject } from '@nestjs/common';

/** Nest injection token of the `Database` handle. */
export const DATABASE = Symbol('DATABASE');
export const InjectDatabase = () => Inject(DATABASE);
