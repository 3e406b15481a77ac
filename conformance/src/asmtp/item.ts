import { test, type T } from '../runner';

/** Register ASMTP.md §10 item `n` as test `asmtp.NN`. */
export function item(n: number, title: string, run: (t: T) => Promise<void>): void {
  test('asmtp', `asmtp.${String(n).padStart(2, '0')}`, title, run);
}
