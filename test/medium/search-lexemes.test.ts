import { CompiledQuery } from 'kysely';
import { plainSearchLexemes, textArray, type Database } from '#db';
import { postgresAndPglite } from '../support/postgres-and-pglite';

/**
 * The accept statements build an envelope's tsvector from lexemes worked out in JS
 * (`plainSearchLexemes`) when the text is plain, and with `to_tsvector('simple', …)` otherwise.
 * For every text it calls plain, the lexemes must be exactly the ones the parser would index, on
 * Postgres and on PGlite (the embedded default): a difference would make search miss an envelope,
 * or find one it should not. Random texts from the plain alphabet, with the other characters mixed
 * in, and compact JSON (a data part's search text), from fixed seeds.
 */

/** A small deterministic generator (mulberry32), so that a failure can be run again. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789eeEE00119';
const WHITESPACE = ' \t\n\r';
const PLAIN_PUNCTUATION = ',;!?()"\'[]{}*=|^`$#_%.:';
/** Characters that make a text not plain (other token kinds, or the locale's lower-casing). */
const OTHER = '-+@/&<>~\\é\u00a0\fšł中';

function texts(seed: number, count: number, punctuation: string): string[] {
  const next = random(seed);
  const pick = (from: string) => from[Math.floor(next() * from.length)];
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let text = '';
    const length = 1 + Math.floor(next() * 60);
    for (let c = 0; c < length; c++) {
      const r = next();
      text += r < 0.6 ? pick(LETTERS) : r < 0.75 ? pick(WHITESPACE) : pick(punctuation);
    }
    out.push(text);
  }
  return out;
}

/** Compact JSON, as a data part's search text is (`JSON.stringify(part.data)`). */
function jsonTexts(seed: number, count: number): string[] {
  const next = random(seed);
  const words = [
    'animal',
    'quokka',
    'Status',
    'OK',
    'x1',
    'e5',
    '9e1ea',
    "it's",
    'k=v',
    'Done.',
    'a b',
    '007',
    'v1.2',
    'x-y',
  ];
  const pick = <T>(from: readonly T[]): T => from[Math.floor(next() * from.length)];
  const value = (depth: number): unknown => {
    const r = next();
    if (depth > 2 || r < 0.4) return pick(words);
    if (r < 0.55) return Math.floor(next() * 1000) * (next() < 0.1 ? -1 : 1);
    if (r < 0.6) return pick([true, false, null]);
    if (r < 0.8) return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
    return Object.fromEntries(Array.from({ length: Math.floor(next() * 4) }, () => [pick(words), value(depth + 1)]));
  };
  return Array.from({ length: count }, () => JSON.stringify(value(0)));
}

/** Prose and the cases each rule of `plainSearchLexemes` is about. */
const CASES = [
  '',
  '!!! ...',
  '!!! ;; ?',
  'The quick brown fox jumps over the lazy dog. Then it sleeps: quietly, (mostly) "happy"!',
  "I'm sure it's fine; don't worry about 50% of $5 #tags or foo_bar = x*y.",
  'Meeting at 10:30, see e.g. the notes at example.com or a.b/c',
  'version 3.5 and 1,000 items; 1e5 9e1ea 123abc abc123',
  'follow-up with bob@example.com <b>now</b> &amp; +1 -2 ~/home C:\\x',
  'école Café İstanbul straße',
  'šala łabędź 中文',
  'ends with a colon:',
  'ends with a stop.',
  'key:value "a":1 at 10:30, note: x; "Done." (it was.) [end.]',
  '{"animal":"quokka","n":5,"ok":true,"list":[1,2,{"deep":"Done."}]}',
  '{"version":1.5}',
  '{"delta":-2}',
  'x._y and a..b',
  `${'a'.repeat(2047)} kept`,
  `${'a'.repeat(2048)} dropped`,
  `${'x'.repeat(900)} the quick brown fox jumps over the lazy dog`,
  'tab\tnew\nline\rcarriage   spaces',
];

const database = postgresAndPglite('roost_search_lexemes', { statementTimeoutMs: 30_000 });

interface Compared {
  text: string;
  parser: string;
  fromLexemes: string | null;
}

/** Each text's tsvector from the parser (positions stripped) and from its JS lexemes (null when not plain). */
async function compare(db: Database, input: string[]): Promise<Compared[]> {
  const lexemes = input.map(plainSearchLexemes);
  const rows = await db.prepared<{ parser: string; from_lexemes: string | null }>(
    'roost_test_search_lexemes',
    CompiledQuery.raw(
      `select strip(to_tsvector('simple', u.text))::text as parser,
              array_to_tsvector(string_to_array(u.lexemes, ' '))::text as from_lexemes
       from unnest($1::text[], $2::text[]) with ordinality as u(text, lexemes, n) order by u.n`,
      [textArray(input), textArray(lexemes)],
    ),
  );
  return rows.map((row, i) => ({ text: input[i], parser: row.parser, fromLexemes: row.from_lexemes }));
}

describe.each(['postgres', 'pglite'] as const)('plain search lexemes on %s', (kind) => {
  const db = () => database(kind);

  test('every plain text gets exactly the lexemes the parser indexes', async () => {
    const input = [
      ...CASES,
      ...texts(1, 4000, PLAIN_PUNCTUATION),
      ...texts(2, 2000, PLAIN_PUNCTUATION + OTHER),
      ...jsonTexts(3, 2000),
    ];
    const compared = await compare(db(), input);
    const plain = compared.filter((c) => c.fromLexemes !== null);
    expect(plain.filter((c) => c.fromLexemes !== c.parser)).toEqual([]);
    // The generator does exercise the JS path, and the texts outside the alphabet go to the parser.
    expect(plain.length).toBeGreaterThan(3000);
    expect(compared.filter((c) => /[-+@/&<>~\\é\u00a0\fšł中]/.test(c.text)).every((c) => c.fromLexemes === null)).toBe(
      true,
    );
  });

  test('the rules: which texts are plain, and their lexemes', async () => {
    const byText = new Map((await compare(db(), CASES)).map((c) => [c.text, c]));
    const plain = (text: string) => byText.get(text)!.fromLexemes !== null;
    expect(plain('The quick brown fox jumps over the lazy dog. Then it sleeps: quietly, (mostly) "happy"!')).toBe(true);
    expect(plain("I'm sure it's fine; don't worry about 50% of $5 #tags or foo_bar = x*y.")).toBe(true);
    expect(plain('ends with a colon:')).toBe(true);
    expect(plain('!!! ...')).toBe(false);
    expect(plain('key:value "a":1 at 10:30, note: x; "Done." (it was.) [end.]')).toBe(true);
    expect(plain('{"animal":"quokka","n":5,"ok":true,"list":[1,2,{"deep":"Done."}]}')).toBe(true);
    expect(plain('{"version":1.5}')).toBe(false);
    expect(plain('{"delta":-2}')).toBe(false);
    expect(plain('x._y and a..b')).toBe(false);
    expect(plain('ends with a stop.')).toBe(true);
    expect(plain(`${'a'.repeat(2047)} kept`)).toBe(true);
    expect(plain(`${'x'.repeat(900)} the quick brown fox jumps over the lazy dog`)).toBe(true);
    // Hosts, files, times, floats, scientific numbers, hyphens, emails, tags, non-ASCII, long words.
    expect(plain('Meeting at 10:30, see e.g. the notes at example.com or a.b/c')).toBe(false);
    expect(plain('version 3.5 and 1,000 items; 1e5 9e1ea 123abc abc123')).toBe(false);
    expect(plain('follow-up with bob@example.com <b>now</b> &amp; +1 -2 ~/home C:\\x')).toBe(false);
    expect(plain('école Café İstanbul straße')).toBe(false);
    // Characters past Latin-1 whose low byte is an ASCII letter (U+0161 š: 0x61 a).
    expect(plain('šala łabędź 中文')).toBe(false);
    expect(plain(`${'a'.repeat(2048)} dropped`)).toBe(false);
    expect(byText.get("I'm sure it's fine; don't worry about 50% of $5 #tags or foo_bar = x*y.")!.fromLexemes).toBe(
      "'5' '50' 'about' 'bar' 'don' 'fine' 'foo' 'i' 'it' 'm' 'of' 'or' 's' 'sure' 't' 'tags' 'worry' 'x' 'y'",
    );
    expect(byText.get('!!! ;; ?')!.fromLexemes).toBe('');
    for (const c of byText.values()) if (c.fromLexemes !== null) expect(c.fromLexemes).toBe(c.parser);
  });
});
