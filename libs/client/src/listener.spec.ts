import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BoundedSet, compareCursors, FileCursorStore, maxCursor } from './cursor';
import { backoffDelay, isHeader } from './listener';

describe('backoff (ASMTP.md §6.6)', () => {
  it('doubles from 1 s to a 30 s ceiling with ±30 % jitter', () => {
    expect([1, 2, 3, 6, 10].map((n) => backoffDelay(n, () => 0.5))).toEqual([1000, 2000, 4000, 30000, 30000]);
    expect(backoffDelay(1, () => 0)).toBe(700);
    expect(backoffDelay(1, () => 1)).toBe(1300);
    expect(backoffDelay(20, () => 1)).toBe(39000);
  });
});

describe('cursor', () => {
  it('orders by created_at then envelope id as byte strings', () => {
    const a = { created_at: 1, envelope_id: '01B' };
    const b = { created_at: 1, envelope_id: '01C' };
    expect(compareCursors(a, b)).toBeLessThan(0);
    expect(compareCursors({ created_at: 2, envelope_id: '01A' }, b)).toBeGreaterThan(0);
    expect(maxCursor(a, b)).toBe(b);
    expect(maxCursor(null, a)).toBe(a);
  });

  it('saves atomically with mode 0600 in the ASMTP CLI watermark shape, and reads it back', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'roost-cursor-')), 'nested', 'cursor.json');
    const store = new FileCursorStore(file);
    expect(store.load().cursor).toBeNull();
    store.save({
      cursor: { created_at: 100_000, envelope_id: '01X' },
      recent: new Map([
        ['01OLD', 1],
        ['01X', 100_000],
      ]),
    });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    expect(saved).toEqual({
      last_seen_created_at: 100_000,
      last_seen_envelope_id: '01X',
      dedup_ids: { '01X': 100_000 },
    });
    expect(store.load().cursor).toEqual({ created_at: 100_000, envelope_id: '01X' });
  });

  it('treats a corrupt file as a fresh start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'roost-cursor-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, '{not json');
    expect(new FileCursorStore(file).load()).toEqual({ cursor: null, recent: new Map() });
  });
});

describe('de-duplication and frame checks', () => {
  it('forgets the oldest ids past its bound', () => {
    const set = new BoundedSet(2);
    set.add('a');
    set.add('b');
    set.add('c');
    expect([set.has('a'), set.has('b'), set.has('c'), set.size]).toEqual([false, true, true, 2]);
  });

  it('accepts an envelope.notify only with the fields the ASMTP CLI requires', () => {
    const frame = {
      op: 'envelope.notify',
      id: '01A',
      from: '@a.b',
      to: ['@c.d'],
      type_hint: 'text',
      created_at: 1,
      date_ms: 1,
    };
    expect(isHeader(frame)).toBe(true);
    expect(isHeader({ ...frame, created_at: '1' })).toBe(false);
    expect(isHeader({ ...frame, to: '@c.d' })).toBe(false);
  });
});
