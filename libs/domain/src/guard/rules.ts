/**
 * Shared machinery of the content-guard detectors (EXTENSIONS.md §4). Pure, no I/O.
 *
 * ReDoS discipline for every pattern in this folder: each repeated class is either preceded by a
 * literal / lookbehind that stops a match from starting inside a run of that class, or bounded
 * (`{0,N}`); no nested quantifiers over overlapping classes. Patterns are compiled once, at load.
 */

/**
 * One pattern of a detector. Two costs keep the guard cheap on the usual message, which matches
 * nothing: a rule runs only when one of its `anchors` occurs in the text (all anchors of all
 * detectors are found in one pass, see anchorScanner), and its pattern starts with a literal (no
 * leading `\b`, class or lookbehind) so V8 can scan for that literal instead of trying every
 * position. Word boundaries before a match go in `notAfter`.
 */
export interface Rule {
  /** Short human description. A constant: never built from the matched text. */
  readonly detail: string;
  /** Lower-case ASCII literals; every match of `pattern` contains at least one (case-insensitively). */
  readonly anchors: readonly string[];
  /** Must carry the `g` flag (we iterate with `exec` and reset `lastIndex`). */
  readonly pattern: RegExp;
  /** A match whose preceding character matches this is not at a boundary and is skipped. */
  readonly notAfter?: RegExp;
  /** Extra check on a match; the rule fires on the first match it accepts. */
  readonly accept?: (match: RegExpExecArray, text: string) => boolean;
}

/** The anchors found in one text. */
export type Anchors = ReadonlySet<string>;

/** `literal` as a regex source that matches exactly it. */
export const escapeRegExp = (literal: string): string => literal.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** Anchors and the texts' characters they can match are ASCII (see anchorScanner): 7 bits. */
const ASCII = 128;

/**
 * Builds one case-insensitive pass that reports which of `anchors` occur in a text, overlapping ones
 * included: an Aho–Corasick automaton over ASCII, one table lookup per character. Anchors are
 * ASCII, and a case-insensitive match (`/i` without `u`) never folds a character outside ASCII
 * onto one inside it (ECMAScript's Canonicalize), so a text's ASCII letters fold to lower case and
 * any other character outside ASCII ends every partial match. The regex pass it replaces (a trie
 * of the anchors, `gi`, resumed one character after each match) cost ~8 ns per character: 130 µs
 * of the guard's ~550 on 16 KB of prose with code in it.
 */
export function anchorScanner(anchors: Iterable<string>): AnchorScanner {
  const unique = [...new Set(anchors)];
  if (unique.some((anchor) => anchor !== anchor.toLowerCase())) throw new Error('anchors are lower case');
  const ascii = (anchor: string) => [...anchor].every((ch) => ch.charCodeAt(0) < ASCII);
  if (unique.some((anchor) => anchor.length === 0 || !ascii(anchor))) throw new Error('anchors are ASCII, never empty');
  // Built on the first scan: a detector's own scanner serves only direct calls (the guard passes
  // the anchors it found), so most processes never need it.
  let automaton: Automaton | undefined;
  // A state's anchors are reported once per text: `reported[state] === scans` once they have been.
  let scans = 0;
  const scanner = (text: string): Anchors => {
    const { step, found, reported } = (automaton ??= automatonOf(unique));
    const present = new Set<string>();
    const scan = ++scans;
    const length = text.length;
    let state = 0;
    for (let i = 0; i < length; i++) {
      let c = text.charCodeAt(i);
      if (c >= ASCII) {
        state = 0;
        continue;
      }
      if (c >= 0x41 && c <= 0x5a) c += 0x20; // A-Z
      state = step[(state << 7) | c];
      if (found[state].length > 0 && reported[state] !== scan) {
        reported[state] = scan;
        for (const anchor of found[state]) present.add(anchor);
      }
    }
    return present;
  };
  return Object.defineProperty(scanner, 'built', { get: () => automaton !== undefined }) as AnchorScanner;
}

/** Finds the anchors in a text; `built` once its automaton is (on the first scan). */
export type AnchorScanner = ((text: string) => Anchors) & { readonly built: boolean };

interface Automaton {
  /** The next state per (state, character): `step[state << 7 | character]`. */
  step: Uint16Array;
  /** The anchors that end at each state, its own and those of the suffixes it has read. */
  found: string[][];
  /** Per state, the scan that last reported it (a count that never wraps in practice). */
  reported: Float64Array;
}

function automatonOf(anchors: readonly string[]): Automaton {
  // The trie: children per state (-1: none) and the anchors ending at each state.
  const children: Int32Array[] = [new Int32Array(ASCII).fill(-1)];
  const ending: string[][] = [[]];
  for (const anchor of anchors) {
    let state = 0;
    for (let i = 0; i < anchor.length; i++) {
      const c = anchor.charCodeAt(i);
      if (children[state][c] === -1) {
        children[state][c] = children.length;
        children.push(new Int32Array(ASCII).fill(-1));
        ending.push([]);
      }
      state = children[state][c];
    }
    ending[state].push(anchor);
  }
  // 2 bytes per entry: the guard's 89 anchors make 407 states, a 102 KB table.
  if (children.length > 0xffff) throw new Error('too many anchor prefixes for one scanner');
  const step = new Uint16Array(children.length * ASCII);
  const failure = new Int32Array(children.length);
  const found: string[][] = ending.map(() => []);
  // Breadth first: each state's failure link and full transition row, and its anchors with those
  // of its failure state (a suffix of what was read), already complete at a shallower depth.
  const queue: number[] = [0];
  for (let head = 0; head < queue.length; head++) {
    const state = queue[head];
    const fallback = failure[state];
    found[state] = state === 0 ? [] : [...new Set([...ending[state], ...found[fallback]])];
    for (let c = 0; c < ASCII; c++) {
      const child = children[state][c];
      if (child === -1) step[state * ASCII + c] = state === 0 ? 0 : step[fallback * ASCII + c];
      else {
        failure[child] = state === 0 ? 0 : step[fallback * ASCII + c];
        step[state * ASCII + c] = child;
        queue.push(child);
      }
    }
  }
  return { step, found, reported: new Float64Array(children.length) };
}

/** The anchors of a rule table, for building a scanner. */
export const anchorsOf = (rules: readonly Rule[]): string[] => [...new Set(rules.flatMap((rule) => rule.anchors))];

/** True when the character before `index` is absent or not in `notAfter`. */
export const atBoundary = (text: string, index: number, notAfter: RegExp): boolean =>
  index === 0 || !notAfter.test(text[index - 1]);

/** Detail of the first rule (in table order) with an anchor present and an accepted match, or null. */
export function firstMatch(rules: readonly Rule[], text: string, present: Anchors): string | null {
  for (const rule of rules) {
    if (!rule.anchors.some((anchor) => present.has(anchor))) continue;
    const { pattern, notAfter, accept } = rule;
    pattern.lastIndex = 0;
    let match: RegExpExecArray | null;
    while ((match = pattern.exec(text)) !== null) {
      if ((!notAfter || atBoundary(text, match.index, notAfter)) && (!accept || accept(match, text))) {
        pattern.lastIndex = 0;
        return rule.detail;
      }
      // A rejected match may overlap an acceptable one: resume one character later.
      pattern.lastIndex = match.index + 1;
    }
  }
  return null;
}

/**
 * Values that announce themselves as not real: AWS's documented example keys, "dummy",
 * "your-key-here", masks (xxxx, ***), template holes (<...>, ${...}, {{...}}), runs of one character.
 */
const PLACEHOLDER =
  /example|dummy|placeholder|sample|fake|redacted|change[-_ ]?me|your[-_ ]?(?:api[-_ ]?)?(?:key|token|secret|password|pass)|(?:key|token|secret|password)[-_ ]?here|x{4}|\*{3}|\.\.\.|…|<[^>]{0,64}>|\{\{|\$\{|(.)\1{7}|0123456789|123456789|abcdefghij/i;

export const isPlaceholder = (value: string): boolean => PLACEHOLDER.test(value);

/** Shannon entropy in bits per character. */
export function entropy(value: string): number {
  if (value.length === 0) return 0;
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/** How many of lower, upper, digit, other appear. */
export function characterClasses(value: string): number {
  let lower = 0;
  let upper = 0;
  let digit = 0;
  let other = 0;
  for (let i = 0; i < value.length; i += 1) {
    const c = value.charCodeAt(i);
    if (c >= 97 && c <= 122) lower = 1;
    else if (c >= 65 && c <= 90) upper = 1;
    else if (c >= 48 && c <= 57) digit = 1;
    else other = 1;
  }
  return lower + upper + digit + other;
}

/** A random-looking token: mixes character classes, spreads its characters, is not a placeholder. */
export function looksRandom(value: string, minLength = 16): boolean {
  if (value.length < minLength || isPlaceholder(value)) return false;
  if (!/\d/.test(value) || !/[A-Za-z]/.test(value)) return false;
  return entropy(value) >= 3;
}

/**
 * Start of the clause that contains `index`: after the last sentence or clause break
 * (. ! ? ; , newline, or the word "but") within `reach` characters before it.
 */
export function clauseBefore(text: string, index: number, reach = 80): string {
  const start = Math.max(0, index - reach);
  const before = text.slice(start, index);
  const cut = Math.max(
    before.lastIndexOf('.'),
    before.lastIndexOf('!'),
    before.lastIndexOf('?'),
    before.lastIndexOf(';'),
    before.lastIndexOf(','),
    before.lastIndexOf('\n'),
    before.toLowerCase().lastIndexOf(' but '),
  );
  return cut >= 0 ? before.slice(cut + 1) : before;
}

/** Words that turn an imperative into a warning, a rule or reported speech. */
export const NEGATION =
  /\b(?:never|not|don't|dont|do\s+not|doesn't|won't|will\s+not|shouldn't|should\s+not|must\s+not|mustn't|cannot|can't|no\s+one|nobody|avoid|refuse|asks?|asked|asking|if|unless|whether|phishing|scam)\b/i;
