import { deterministicUlid } from '#client';
import {
  AliasMap,
  deriveThread,
  importId,
  importKey,
  parseRecord,
  readLog,
  refusalSummary,
  sampId,
  splitThreadPrefix,
  type SampRecord,
} from './samp';

describe('SAMP v1 records', () => {
  it('hashes {body, from, thread, to, ts} with sorted keys and raw non-ASCII', () => {
    const record = { ts: 1754000000, from: 'alice', to: 'bob', thread: 't1', body: 'héllo "x"\n' };
    const id = sampId(record);
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    // Same content, same id; NFD and NFC bodies hash alike.
    expect(sampId({ ...record })).toBe(id);
    expect(sampId({ ...record, body: 'he\u0301llo "x"\n' })).toBe(id);
    expect(sampId({ ...record, ts: record.ts + 1 })).not.toBe(id);
  });

  it('matches the canonical serialisation of the spec (Python json.dumps sort_keys, ensure_ascii False)', () => {
    // Reference values computed with Python: json.dumps(r, sort_keys=True, separators=(',', ':'), ensure_ascii=False)
    expect(sampId({ body: 'hi', from: 'a', thread: 't', to: 'b', ts: 1 })).toBe('a0262eb354f4a390');
    expect(sampId({ ts: 1754000000, from: 'alice', to: 'bob', thread: 't1', body: 'héllo "x"\n' })).toBe(
      '9ba6562eea303d7b',
    );
  });

  it('derives threads and strips a [thread:X] prefix', () => {
    expect(deriveThread('alice', 0, 'Deploy plan: Friday!\nmore')).toBe('1970-01-01-alice-deploy-plan-friday');
    expect(deriveThread('alice', 0, '!!!')).toBe('1970-01-01-alice-msg');
    expect(splitThreadPrefix('[thread:ops\u0007] go')).toEqual({ thread: 'ops', body: 'go' });
  });

  it('skips malformed lines, dedups by (from, id) and orders by ts', () => {
    const a = JSON.stringify({ id: '0123456789abcdef', ts: 20, from: 'a', to: 'b', thread: 't', body: 'second' });
    const b = JSON.stringify({ ts: 10, from: 'a', to: 'b', thread: 't', body: 'first' });
    const { records, skipped } = readLog([a, 'not json', a, b, '{"ts":"x"}', ''].join('\n'));
    expect(records.map((r) => r.body)).toEqual(['first', 'second']);
    expect(skipped.map((s) => s.line)).toEqual([2, 5]);
    expect(records[0].id).toBe(sampId({ ts: 10, from: 'a', to: 'b', thread: 't', body: 'first' }));
  });

  it('maps aliases to handles and back', () => {
    const map = new AliasMap(['Bob.X=@acme.bob'], 'acme');
    expect(map.handle('Bob.X')).toBe('@acme.bob');
    expect(map.handle('Carol.Y')).toBe('@acme.carol-y');
    expect(map.alias('@acme.bob')).toBe('Bob.X');
    expect(map.alias('@acme.carol')).toBe('carol');
    expect(new AliasMap([]).handle('x')).toBeUndefined();
  });

  it('keys imports by (from, id) so a re-import derives the same envelope id', () => {
    const record = parseRecord(JSON.stringify({ ts: 1, from: 'a', to: 'b', thread: 't', body: 'x' }));
    expect('error' in record).toBe(false);
    expect(importKey(record as never, '@acme.a')).toMatch(/^samp\/v1:@acme\.a:[0-9a-f]{16}$/);
  });

  it('derives ids from the mapped handle: one folder imported for two owners does not collide', () => {
    const record = parseRecord(JSON.stringify({ ts: 1, from: 'a', to: 'b', thread: 't', body: 'x' })) as SampRecord;
    const one = importId(record, '@one.a', deterministicUlid);
    const two = importId(record, '@two.a', deterministicUlid);
    expect(one.id).not.toBe(two.id);
    expect(importId(record, '@one.a', deterministicUlid)).toEqual(one);
    expect(one.original).toBe(false);
  });

  it('a record exported from an envelope imports back as that envelope, for the same sender only', () => {
    const line = JSON.stringify({
      id: '0123456789abcdef',
      ts: 1,
      from: 'a',
      to: 'b',
      thread: 't',
      body: 'x',
      asmtp_id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y',
      asmtp_from: '@acme.a',
    });
    const record = parseRecord(line) as SampRecord;
    expect(record).toMatchObject({ asmtp_id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y', asmtp_from: '@acme.a' });
    expect(importId(record, '@acme.a', deterministicUlid)).toEqual({
      id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y',
      original: true,
    });
    expect(importId(record, '@other.a', deterministicUlid).original).toBe(false);
    expect(parseRecord(JSON.stringify({ ...JSON.parse(line), asmtp_id: 'nope' }))).not.toHaveProperty('asmtp_id');
  });

  it('summarises a refused batch: counts per code and the first three reasons, each short', () => {
    const refused = Array.from({ length: 18 }, (_, i) => ({
      file: '/x/log-a.jsonl',
      id: `id${i}`,
      code: 'ID_COLLISION',
      message: 'envelope id is already used by another sender '.repeat(5),
    }));
    const { text, hint } = refusalSummary(refused);
    const lines = text.split('\n');
    expect(lines[0]).toBe('refused 18: ID_COLLISION ×18');
    expect(lines).toHaveLength(5);
    expect(lines[4]).toBe('  … 15 more (--json lists them all)');
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThan(160);
    expect(hint).toMatch(/another sender/);
  });
});
