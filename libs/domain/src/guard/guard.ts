import { jsonSize } from '../json-size';
import { CREDENTIAL_REQUEST_ANCHORS, CREDENTIAL_REQUEST_DETAILS, detectCredentialRequest } from './credential-request';
import { DESTRUCTIVE_ANCHORS, DESTRUCTIVE_DETAILS, detectDestructive } from './destructive';
import { detectProduction, PRODUCTION_ANCHORS, PRODUCTION_DETAILS } from './production';
import { anchorScanner, type Anchors } from './rules';
import { detectSecret, SECRET_ANCHORS, SECRET_DETAILS } from './secret';

export { detectCredentialRequest } from './credential-request';
export { detectDestructive } from './destructive';
export { detectProduction } from './production';
export { detectSecret } from './secret';

/**
 * Content guard (EXTENSIONS.md §4): pure detectors over an envelope's subject and content parts.
 * It reports; the caller applies the sender's off | warn | block policy. A finding's `detail` is a
 * constant description of the kind of match and never contains matched text.
 */
export type GuardCode = 'secret' | 'destructive' | 'production' | 'credential_request' | 'large';

/** Order of findings within one part. */
export const GUARD_CODES: readonly GuardCode[] = ['secret', 'destructive', 'production', 'credential_request', 'large'];

export interface GuardFinding {
  code: GuardCode;
  /** 'subject', or the index of the part in content_parts. */
  part: 'subject' | number;
  detail: string;
}

export interface GuardInput {
  subject?: string;
  parts: ReadonlyArray<{ type: string; [k: string]: unknown }>;
}

export interface GuardOptions {
  /** ROOST_GUARD_LARGE_BYTES; default 16 KiB per EXTENSIONS.md §4. */
  largeBytes: number;
}

/**
 * Every `detail` a detector can produce: a closed set of constants, so a detail can never carry
 * matched text. (`large` is the one computed detail: "content is N bytes, above the M-byte limit".)
 */
export const GUARD_DETAILS: Readonly<Record<Exclude<GuardCode, 'large'>, readonly string[]>> = {
  secret: SECRET_DETAILS,
  destructive: DESTRUCTIVE_DETAILS,
  production: PRODUCTION_DETAILS,
  credential_request: CREDENTIAL_REQUEST_DETAILS,
};

type TextDetector = (text: string, present: Anchors) => string | null;

/** One pass per text finds the anchors of all four detectors; each then runs only its rules that can match. */
const ANCHORS = [
  ...new Set([...SECRET_ANCHORS, ...DESTRUCTIVE_ANCHORS, ...PRODUCTION_ANCHORS, ...CREDENTIAL_REQUEST_ANCHORS]),
];
const scanAnchors = anchorScanner(ANCHORS);

const DETECTORS: ReadonlyArray<readonly [GuardCode, TextDetector]> = [
  ['secret', detectSecret],
  ['destructive', detectDestructive],
  ['production', detectProduction],
  ['credential_request', detectCredentialRequest],
];

/** Text scanned per call, in UTF-16 code units over subject and parts together; the rest is not scanned. */
export const GUARD_SCAN_LIMIT = 1 << 20;
/** Nesting levels of a data part that are walked; deeper values are not scanned. */
export const GUARD_DATA_DEPTH = 32;

/**
 * Scans subject, text parts' `text` and data parts' `data`; image and file parts carry no text.
 * A data part is flattened to one `key: value` line per string (keys of nested objects on their own
 * line), so "password: …" reads the same in JSON as in prose.
 *
 * Findings: at most one per (code, part), subject first, then parts by index, and within one part in
 * GUARD_CODES order. `large` is one finding when the UTF-8 size of JSON(subject) + JSON(parts)
 * exceeds `largeBytes`, on the largest of subject and parts (earliest on a tie), with the detail
 * "content is N bytes, above the M-byte limit".
 */
export function scanContent(input: GuardInput, options: GuardOptions): GuardFinding[] {
  const findings: GuardFinding[] = [];
  const budget = { left: GUARD_SCAN_LIMIT };
  const large = largeFinding(input, options.largeBytes);

  const scan = (part: 'subject' | number, text: string | null): void => {
    if (text !== null && text.length > 0) {
      const present = scanAnchors(text);
      for (const [code, detect] of DETECTORS) {
        const detail = detect(text, present);
        if (detail !== null) findings.push({ code, part, detail });
      }
    }
    if (large !== null && large.part === part) findings.push(large);
  };

  scan('subject', typeof input.subject === 'string' ? take(input.subject, budget) : null);
  input.parts.forEach((part, index) => scan(index, textOf(part, budget)));
  return findings;
}

/**
 * Does at start-up what the first scans of a process would: builds the anchor automaton (~3–5 ms)
 * and runs each rule whose anchor a text holds, twice, so V8 compiles its pattern (interpreted
 * bytecode on the first run, native code on the next). The credential-request detector's composed
 * patterns cost ~38 ms on their first run and ~18 ms on their second: on a fresh api the first
 * message that said "token" or "password" took 32 ms in the server instead of 9, the next 12
 * instead of 4, and every request that came meanwhile waited. ~115 ms at start-up. Each anchor is
 * a part of its own, so a rule that matches one anchor does not keep the rules after it from
 * running on the others; together the parts hold every anchor.
 */
export function warmGuard(): void {
  const parts = ANCHORS.map((text) => ({ type: 'text', text }));
  for (let run = 0; run < 2; run++) scanContent({ parts }, { largeBytes: Infinity });
}

/** Whether the guard's anchor automaton is built (for the test of warmGuard). */
export const guardWarm = (): boolean => scanAnchors.built;

interface Budget {
  left: number;
}

function take(text: string, budget: Budget): string | null {
  if (budget.left <= 0) return null;
  const taken = text.length <= budget.left ? text : text.slice(0, budget.left);
  budget.left -= taken.length;
  return taken;
}

function textOf(part: { type: string; [k: string]: unknown }, budget: Budget): string | null {
  if (part.type === 'text' && typeof part.text === 'string') return take(part.text, budget);
  if (part.type === 'data' && typeof part.data === 'object' && part.data !== null) {
    const lines: string[] = [];
    flatten(part.data, '', 0, lines, budget);
    return lines.length > 0 ? lines.join('\n') : null;
  }
  return null;
}

function flatten(value: unknown, key: string, depth: number, lines: string[], budget: Budget): void {
  if (budget.left <= 0 || depth > GUARD_DATA_DEPTH) return;
  if (typeof value === 'string') {
    const line = take(key === '' ? value : `${key}: ${value}`, budget);
    if (line !== null) lines.push(line);
  } else if (Array.isArray(value)) {
    for (const item of value) flatten(item, key, depth + 1, lines, budget);
  } else if (typeof value === 'object' && value !== null) {
    for (const [name, child] of Object.entries(value)) {
      if (budget.left <= 0) return;
      if (typeof child === 'object' && child !== null) {
        const line = take(name, budget);
        if (line !== null) lines.push(line);
      }
      flatten(child, name, depth + 1, lines, budget);
    }
  }
}

const utf8Bytes = (value: unknown): number => {
  try {
    return jsonSize(value, 'bytes');
  } catch {
    return 0; // not JSON (a cycle, a BigInt): cannot have come from a request body
  }
};

function largeFinding(input: GuardInput, largeBytes: number): GuardFinding | null {
  const subjectBytes = typeof input.subject === 'string' ? utf8Bytes(input.subject) : 0;
  const partBytes = input.parts.map(utf8Bytes);
  // JSON of the array: brackets plus a comma between parts.
  const total = subjectBytes + 2 + Math.max(0, partBytes.length - 1) + partBytes.reduce((sum, n) => sum + n, 0);
  if (total <= largeBytes) return null;
  let part: 'subject' | number = typeof input.subject === 'string' || partBytes.length === 0 ? 'subject' : 0;
  let largest = part === 'subject' ? subjectBytes : partBytes[0];
  partBytes.forEach((bytes, index) => {
    if (bytes > largest) {
      part = index;
      largest = bytes;
    }
  });
  return { code: 'large', part, detail: `content is ${total} bytes, above the ${largeBytes}-byte limit` };
}
