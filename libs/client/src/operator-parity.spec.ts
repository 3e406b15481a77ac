import { CLOSE_CODES, compareCursors as operatorCompare } from '../../domain/src';
import { compareCursors } from './cursor';
import { CLOSE_REVOKED, CLOSE_SERVICE_RESTART, CLOSE_SLOW_CONSUMER } from './listener';

/** [a, b, sign of a − b] in ASMTP.md §3.5 order: created_at, then envelope id as byte strings. */
const CURSOR_VECTORS: Array<[[number, string], [number, string], -1 | 0 | 1]> = [
  [[1, '01B'], [1, '01C'], -1],
  [[1, '01C'], [1, '01B'], 1],
  [[1, '01B'], [1, '01B'], 0],
  [[2, '01A'], [1, '01Z'], 1],
  [[1, '01Z'], [2, '01A'], -1],
  [[0, '01000000000000000000000000'], [1, '00000000000000000000000000'], -1],
  // Byte order, not locale order: upper case before lower case, digits before letters.
  [[5, '01ABC'], [5, '01abc'], -1],
  [[5, '019'], [5, '01A'], -1],
  [[5, '01A'], [5, '01AA'], -1],
  // Milliseconds beyond 2^32 still compare numerically.
  [[2 ** 41, '01A'], [2 ** 41 + 1, '01A'], -1],
];

describe('the SDK copies of operator rules', () => {
  it.each([
    ['operator (libs/domain)', operatorCompare],
    ['SDK (libs/client)', compareCursors],
  ])('%s orders cursors by the shared vectors', (_name, compare) => {
    for (const [[aAt, aId], [bAt, bId], sign] of CURSOR_VECTORS) {
      const a = { created_at: aAt, envelope_id: aId };
      const b = { created_at: bAt, envelope_id: bId };
      expect([aAt, aId, bAt, bId, Math.sign(compare(a, b))]).toEqual([aAt, aId, bAt, bId, sign]);
    }
  });

  it('closes with the codes the gateway sends', () => {
    expect([CLOSE_REVOKED, CLOSE_SLOW_CONSUMER, CLOSE_SERVICE_RESTART]).toEqual([
      CLOSE_CODES.revoked,
      CLOSE_CODES.slowConsumer,
      CLOSE_CODES.serviceRestart,
    ]);
  });
});
