import { AliasMap, deriveThread, importKey, parseRecord, readLog, sampId, splitThreadPrefix } from './samp';

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
    expect(sampId({ ts: 1754000000, from: 'alice', to: 'bob', thread: 't1', body: 'héllo "x"\n' })).toBe('9ba6562eea303d7b');
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
    expect(importKey(record as never)).toMatch(/^samp\/v1:a:[0-9a-f]{16}$/);
  });
});
