import { CompiledQuery } from 'kysely';
import { bigintArray, openPglite, openPostgres, textArray, type Database } from '#db';
import { createTestDatabase } from '../support/database';

/**
 * The accept statements' array parameters go to Postgres in the binary array format (no literal,
 * no escaping) and to PGlite as plain arrays: both must arrive element for element as sent.
 */

const texts = [
  '',
  'plain',
  '{"id":"01J","to":["@a.b"],"content_parts":[{"type":"text","text":"say \\"hi\\""}]}',
  'back\\slash, comma {brace} "quote"',
  'NULL',
  ' spaced ',
  'é ü 中文 🦜',
  'x'.repeat(5000),
  null,
];
const bigints = [
  0,
  1,
  -1,
  42,
  1_764_678_000_123,
  -1_764_678_000_123,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_SAFE_INTEGER,
  null,
];

let database: { url: string; drop: () => Promise<void> };
const opened: Database[] = [];

beforeAll(async () => {
  database = await createTestDatabase('roost_array_params');
  opened.push(openPostgres({ url: database.url, poolSize: 1, statementTimeoutMs: 5_000 }));
  opened.push(await openPglite('memory://'));
  // Unnamed statements (ROOST_DB_PREPARED_STATEMENTS=off, or behind a transaction pooler).
  opened.push(openPostgres({ url: database.url, poolSize: 1, statementTimeoutMs: 5_000, preparedStatements: false }));
});

afterAll(async () => {
  await Promise.all(opened.map((db) => db.close()));
  await database.drop();
});

const roundTrip = (db: Database, name: string, sql: string, param: unknown) =>
  db.prepared<{ v: unknown }>(name, CompiledQuery.raw(sql, [param]));

describe.each(['postgres', 'pglite', 'postgres, unnamed statements'])('array parameters on %s', (kind) => {
  const db = () => opened[['postgres', 'pglite', 'postgres, unnamed statements'].indexOf(kind)];

  test('text[] elements arrive exactly as sent, nulls and empty arrays included', async () => {
    expect(await roundTrip(db(), 'roost_test_text', 'select $1::text[] as v', textArray(texts))).toEqual([
      { v: texts },
    ]);
    expect(await roundTrip(db(), 'roost_test_text', 'select $1::text[] as v', textArray([]))).toEqual([{ v: [] }]);
    const rows = await roundTrip(
      db(),
      'roost_test_unnest',
      'select t.v from unnest($1::text[]) with ordinality as t(v, n) order by t.n',
      textArray(texts),
    );
    expect(rows.map((row) => row.v)).toEqual(texts);
  });

  test('bigint[] elements arrive exactly as sent, negatives and nulls included', async () => {
    const rows = await roundTrip(
      db(),
      'roost_test_bigint',
      'select t.v from unnest($1::bigint[]) with ordinality as t(v, n) order by t.n',
      bigintArray(bigints),
    );
    expect(rows.map((row) => row.v)).toEqual(bigints);
    expect(await roundTrip(db(), 'roost_test_bigints', 'select $1::bigint[] as v', bigintArray([]))).toEqual([
      { v: [] },
    ]);
  });
});

test('on Postgres the parameters are bound in the binary format', () => {
  const encoded = textArray(['a"b']).toPostgres();
  // ndim 1, no nulls, element type text (25), length 1, lower bound 1, then length-prefixed UTF-8.
  expect([...encoded]).toEqual([
    0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3, 0x61, 0x22, 0x62,
  ]);
  expect(() => bigintArray([1.5]).toPostgres()).toThrow(RangeError);
});
