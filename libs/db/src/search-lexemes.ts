/**
 * The lexemes that `to_tsvector('simple', text)` would index, worked out in JS for the texts where
 * that is certain, so that Postgres builds the envelope's tsvector with `array_to_tsvector` instead
 * of running its text-search parser.
 *
 * Why: the parser is the most expensive step of storing an envelope. On 1 KB of English prose it
 * takes ~130 µs of Postgres CPU (per character it converts to wide characters and runs a state
 * machine of two dozen token types), more than everything else the accept statement does for that
 * envelope; `array_to_tsvector` over the same 177 words takes 35–45 µs, and working them out here
 * takes 4.5–5 µs of the api node's CPU (measured on a slow 2-vCPU machine). The statement sits on the
 * hot mailbox's chain (one statement at a time per mailbox), so its Postgres time bounds the accept
 * rate.
 *
 * Search only ever asks `search @@ tsquery` with every query word as a prefix (`word:*`, ANDed):
 * positions and weights are never read, so the lexeme set is all that has to match.
 *
 * A text is "plain" when it is ASCII made of letters, digits, whitespace (space, tab, CR, LF) and
 * the punctuation below, none of which the default parser ever makes part of a token here:
 *   , ; : ! ? ( ) " ' [ ] { } * = | ^ ` $ # _ %
 * and `.` only where no letter, digit, `.` or `_` follows (a sentence's end, `"Done."`), never
 * inside a run ("e.g", "a.b" hosts and files, "3.5", "x._y", ".."). `:` alone makes no token
 * ("10:30", "key:value", JSON's `"a":1`): URLs need `/`. For such a text every maximal run of
 * letters and digits is one token, lower-cased, with two exceptions that make the text not plain
 * here: a run of digits followed by `e` and a digit (the parser's scientific float, "9e1ea" →
 * `9e1` and `ea`), and a run of 2,048 characters or more (the parser drops words of 2,048 bytes
 * and more). Hyphens, `@`, `/`, `&`, `<`, `+`, `~`, `\`, and anything non-ASCII start tokens of
 * other kinds (hyphenated words, emails, paths, URLs, entities, tags, signed numbers) or need the
 * database's locale to lower-case: those texts go to `to_tsvector` unchanged. Plain texts include
 * English prose without hyphens, URLs, decimals or non-ASCII letters, and the compact JSON of data
 * parts whose strings are plain and whose numbers are non-negative integers.
 *
 * test/medium/search-lexemes.test.ts compares this with `to_tsvector` on Postgres and PGlite over
 * random texts from this alphabet and beyond, and at the word-length boundary.
 */
/** The plain punctuation and whitespace: word separators wherever they stand (`.` only where `joinsDot` is false). */
const SEPARATORS = ' \t\n\r,;!?()"\'[]{}*=|^`$#_%.:';
const NOT_PLAIN = 255;
const SEPARATOR = 0;
/** Per byte: the lower-cased letter or digit, SEPARATOR, or NOT_PLAIN (every byte from 128). */
const CLASS = new Uint8Array(256).fill(NOT_PLAIN);
for (let c = 0x30; c <= 0x39; c++) CLASS[c] = c;
for (let c = 0x61; c <= 0x7a; c++) CLASS[c] = c;
for (let c = 0x41; c <= 0x5a; c++) CLASS[c] = c + 0x20;
for (const c of SEPARATORS) CLASS[c.charCodeAt(0)] = SEPARATOR;
/** Postgres keeps words up to 2,047 bytes (MAXSTRLEN); longer ones it leaves out with a notice. */
const MAX_WORD = 2047;

const isDigit = (byte: number) => byte >= 0x30 && byte <= 0x39;
/** After a `.`: a letter, digit, `.` or `_`, which the parser may join with it into a host, file or number. */
const joinsDot = (byte: number) => CLASS[byte] !== SEPARATOR || byte === 0x2e || byte === 0x5f;

/**
 * The text's lexemes, separated by single spaces (possibly repeated: `array_to_tsvector` sorts
 * them and removes duplicates), when the text is plain; `null` when Postgres's parser must do it.
 * One pass over the text's bytes, rewritten in place (a global regular-expression replace took
 * four times as long, a pass over the string's characters 1.5 times).
 */
export function plainSearchLexemes(text: string): string | null {
  const length = text.length;
  // ASCII only: then each character is one byte of its Latin-1 encoding, the same byte as in UTF-8.
  if (Buffer.byteLength(text, 'utf8') !== length) return null;
  const bytes = Buffer.from(text, 'latin1');
  let written = 0;
  let run = 0;
  let digitsOnly = false;
  for (let i = 0; i < length; i++) {
    const byte = bytes[i];
    const mapped = CLASS[byte];
    if (mapped === NOT_PLAIN) return null;
    if (mapped === SEPARATOR) {
      if (byte === 0x2e && i + 1 < length && joinsDot(bytes[i + 1])) return null;
      if (run > 0) bytes[written++] = 0x20;
      run = 0;
      continue;
    }
    if (run === 0) digitsOnly = true;
    // Digits, then `e` and a digit: the parser's scientific float, which may end inside the run.
    else if (digitsOnly && mapped === 0x65 && i + 1 < length && isDigit(bytes[i + 1])) return null;
    if (digitsOnly && !isDigit(byte)) digitsOnly = false;
    if (++run > MAX_WORD) return null;
    bytes[written++] = mapped;
  }
  if (written > 0 && run === 0) written--;
  return bytes.toString('latin1', 0, written);
}
