import { randomBytes } from 'node:crypto';
import { connect as tcp, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import pg from 'pg';
import WebSocket from 'ws';
import { responseSchemaFor, responseViolations } from '#schemas';
import { envelope, startOperator, type TestOperator } from '../support/operator';
import { digests, type TableDigests } from '../support/state';
import { connect } from '../support/ws';

/**
 * Hostile input (issue 9; DESIGN.md invariant 6): property-based tests over every route and the
 * WebSocket. Valid requests are mutated (fields dropped, duplicated, retyped; huge strings and
 * arrays; deep nesting; unicode, NULs, invalid UTF-8), query strings and paths are garbled
 * (random bytes, `%`, `%zz`, `%00`, repeated and very long parameters), raw HTTP is broken, frames
 * are oversized and flooded, clients are slow. Every input must get a precise 4xx with the ASMTP
 * error body (or a closed socket where that is the protocol's answer), never a 5xx; the process
 * stays healthy; and nothing changes, except for inputs that happen to be valid, whose change is
 * checked against the tables the route may write.
 *
 * Each property runs under two seeds, half its runs each: a fixed one (the same inputs every run, so
 * a regression shows at once) and a random one (new inputs every run). A failure names its seed;
 * ROOST_FC_SEED=<seed> replays that one alone with all the runs. Scale the run with ROOST_FC_SCALE
 * (default 1, about a minute).
 */

jest.setTimeout(300_000);

const FIXED_SEED = 1_206_170_891;
const SEEDS =
  process.env.ROOST_FC_SEED !== undefined
    ? [Number(process.env.ROOST_FC_SEED)]
    : [FIXED_SEED, randomBytes(4).readUInt32BE(0) >>> 1];
const SCALE = Number(process.env.ROOST_FC_SCALE ?? 1);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));
const MAX_CLIENT_FRAME = 4096;
const REQUEST_TIMEOUT_MS = 2000;
const DAY = 86_400_000;
const MiB = 1024 * 1024;
const ZERO_ID = `01${'0'.repeat(24)}`;
const enc = encodeURIComponent;

/** Every code an error body may carry (ASMTP.md §4, EXTENSIONS.md). */
const KNOWN_CODES = new Set([
  'INVALID_JSON',
  'PAYLOAD_TOO_LARGE',
  'INVALID_REQUEST',
  'INVALID_ENVELOPE_ID',
  'INVALID_HANDLE',
  'INVALID_CONTENT',
  'INVALID_MONITOR',
  'INVALID_REFERENCES',
  'INVALID_FILE',
  'INVALID_QUERY',
  'INVALID_POLICY',
  'INVALID_DISPLAY_NAME',
  'INVALID_DESCRIPTION',
  'INVALID_CARD_BODY',
  'INVALID_VISIBILITY',
  'INVALID_UPDATE',
  'INVALID_ENTRIES',
  'INVALID_ALLOWLIST_ENTRY',
  'INVALID_BLOCK_TARGET',
  'INVALID_LIMIT',
  'INVALID_CURSOR',
  'INVALID_ORG',
  'INVALID_CONTENT_GUARD',
  'INVALID_RETENTION',
  'INVALID_QUOTA',
  'INVALID_RECEIPT',
  'INVALID_SCHEDULE',
  'BAD_REQUEST',
  'UNAUTHORIZED',
  'NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'AGENT_EXISTS',
  'ORG_EXISTS',
  'ID_COLLISION',
  'RETRY_MISMATCH',
  'CONTENT_BLOCKED',
  'QUOTA_EXCEEDED',
  'RATE_LIMITED',
]);

let op: TestOperator;
let db: pg.Pool;
let port: number;
const fixture = {} as {
  alice: string;
  bob: string;
  carol: string;
  hxAdmin: string;
  e1: string;
  e2: string;
  f1: string;
  s1: string;
  /** Pending uploads of alice's, one per valid-looking send that attaches a file. */
  pool: string[];
};
/** Inputs tried per route (the printed summary) and the statuses they got. */
const tried = new Map<string, { inputs: number; statuses: Map<string, number> }>();
/** Milliseconds spent per property. */
const elapsed = new Map<string, number>();

function tally(route: string, status: number | 'closed'): void {
  const row = tried.get(route) ?? { inputs: 0, statuses: new Map<string, number>() };
  row.inputs++;
  row.statuses.set(String(status), (row.statuses.get(String(status)) ?? 0) + 1);
  tried.set(route, row);
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP: every request is built byte for byte, so nothing in the client tidies the input.
// ---------------------------------------------------------------------------------------------

interface RawResponse {
  /** undefined: the server closed the socket without answering. */
  status?: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Send `request` on a fresh TCP connection; resolve on a complete response or on close. */
function rawHttp(request: Buffer | string, { head = false, timeoutMs = 15_000 } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = tcp(port, '127.0.0.1');
    let buffer = Buffer.alloc(0);
    let done = false;
    const finish = (response: RawResponse) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(response);
    };
    const timer = setTimeout(() => {
      done = true;
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms to ${String(request).slice(0, 200)}`));
    }, timeoutMs);
    const parse = (closed: boolean) => {
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) {
        if (closed) finish({ headers: {}, body: Buffer.alloc(0) });
        return;
      }
      const [statusLine, ...lines] = buffer.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1]);
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const rest = buffer.subarray(end + 4);
      if (status === 101 || head || status === 204) return finish({ status, headers, body: Buffer.alloc(0) });
      const length = headers['content-length'];
      if (length !== undefined && rest.length >= Number(length))
        return finish({ status, headers, body: rest.subarray(0, Number(length)) });
      if (closed) finish({ status, headers, body: headers['transfer-encoding'] === 'chunked' ? dechunk(rest) : rest });
    };
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      parse(false);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => parse(true));
    socket.write(request);
  });
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    if (eol === -1) break;
    const size = parseInt(data.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

interface HttpInput {
  method: string;
  /** The request target exactly as it goes on the wire. */
  target: string;
  token?: string;
  headers?: Array<[string, string]>;
  body?: Buffer | string;
}

function build(input: HttpInput): Buffer {
  const body =
    input.body === undefined ? undefined : Buffer.isBuffer(input.body) ? input.body : Buffer.from(input.body, 'utf8');
  const lines = [`${input.method} ${input.target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
  if (input.token !== undefined) lines.push(`Authorization: Bearer ${input.token}`);
  for (const [name, value] of input.headers ?? []) lines.push(`${name}: ${value}`);
  if (body !== undefined) lines.push(`Content-Length: ${body.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body ?? Buffer.alloc(0)]);
}

const send = (input: HttpInput) => rawHttp(build(input), { head: input.method === 'HEAD' });

const describeInput = (input: HttpInput) =>
  `${input.method} ${input.target.slice(0, 300)}${input.target.length > 300 ? `…(${input.target.length})` : ''}` +
  (input.body === undefined ? '' : ` body(${input.body.length}): ${String(input.body).slice(0, 300)}`);

/**
 * A response to hostile input is either a success the route allows (its body valid against the
 * route's wire schema) or a precise 4xx: the ASMTP error body with a known code. Never a 5xx.
 */
function judge(
  route: string,
  input: HttpInput,
  response: RawResponse,
  allowed: { success: number[]; closed?: boolean },
): void {
  tally(route, response.status ?? 'closed');
  const what = `${route}: ${describeInput(input)} → ${response.status ?? 'closed'} ${response.body.toString('utf8').slice(0, 300)}`;
  if (response.status === undefined) {
    if (!allowed.closed) throw new Error(`closed without an answer: ${what}`);
    return;
  }
  const status = response.status;
  if (status >= 500 || (status < 200 && !allowed.success.includes(status))) throw new Error(`not a 2xx/4xx: ${what}`);
  // The router ends the path at `?` or `#` (find-my-way drops a fragment the client sent raw).
  const path = input.target.split(/[?#]/)[0];
  const type = response.headers['content-type'] ?? '';
  if (status >= 400) {
    if (type !== 'application/json; charset=utf-8') throw new Error(`error without the JSON content type: ${what}`);
    if (input.method === 'HEAD') return; // no body on a HEAD response
    let body: { error?: { code?: unknown; message?: unknown } };
    try {
      body = JSON.parse(response.body.toString('utf8'));
    } catch {
      throw new Error(`error body is not JSON: ${what}`);
    }
    const violations = responseViolations('error', body);
    if (violations.length > 0 || Object.keys(body).length !== 1)
      throw new Error(`not the ASMTP error body (${violations.join('; ')}): ${what}`);
    if (!KNOWN_CODES.has(body.error!.code as string)) throw new Error(`unknown error code: ${what}`);
    return;
  }
  if (!allowed.success.includes(status)) throw new Error(`unexpected success: ${what}`);
  const schema = responseSchemaFor(input.method, path, status);
  if (schema !== undefined && type.startsWith('application/json')) {
    const violations = responseViolations(schema, JSON.parse(response.body.toString('utf8')));
    if (violations.length > 0) throw new Error(`success violates ${schema} (${violations.join('; ')}): ${what}`);
  }
}

/** Tables whose digest differs, with the row-count change of each. */
function changes(before: TableDigests, after: TableDigests): Record<string, number> {
  const changed: Record<string, number> = {};
  for (const table of Object.keys(before) as Array<keyof TableDigests>) {
    if (before[table] === after[table]) continue;
    changed[table] = Number(after[table].split(':')[0]) - Number(before[table].split(':')[0]);
  }
  return changed;
}

async function expectHealthy(): Promise<void> {
  const health = await rawHttp(build({ method: 'GET', target: '/healthz' }));
  expect(health.status).toBe(200);
}

/**
 * Run a property over `arb`, under each of SEEDS with its share of `numRuns`. Each property draws
 * from its own seed, derived from the run's seed and `label`, so routes get different inputs and one
 * seed still replays them all (fast-check draws the same first runs from a seed whatever numRuns).
 */
async function check<T>(
  label: string,
  arb: fc.Arbitrary<T>,
  numRuns: number,
  run: (input: T) => Promise<void>,
): Promise<void> {
  for (const base of SEEDS) {
    let seed = base;
    for (const char of label) seed = (Math.imul(seed ^ char.charCodeAt(0), 16777619) >>> 0) & 0x7fffffff;
    const started = Date.now();
    // fc.check, not fc.assert: assert prints the counterexample, and printing a several-thousand-level
    // deep body overflowed the stack and hid the failure behind a RangeError.
    const details = await fc.check(fc.asyncProperty(arb, run), {
      seed,
      numRuns: Math.ceil(numRuns / SEEDS.length),
      endOnFailure: true,
    });
    if (details.failed) {
      const error =
        details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
      throw new Error(
        `${label}: failed after ${details.numRuns} runs (ROOST_FC_SEED=${base}, property seed ${seed}): ${error.slice(0, 4000)}`,
      );
    }
    elapsed.set(label, (elapsed.get(label) ?? 0) + Date.now() - started);
  }
}

/** A batch whose inputs may not change anything: state compared once around the whole batch. */
async function readOnlyBatch(body: () => Promise<void>): Promise<void> {
  const before = await digests(db);
  await body();
  await expectHealthy();
  expect(changes(before, await digests(db))).toEqual({});
}

// ---------------------------------------------------------------------------------------------
// Arbitraries: hostile values, JSON mutations, query fragments.
// ---------------------------------------------------------------------------------------------

const TRICKY_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  '\udc00\ud800',
  '\u2028\u2029',
  '\ufeff',
  '\uffff',
  '\u{10ffff}',
  'e\u0301',
  '\u202e',
  '🦜',
  '%',
  '%00',
  '%zz',
  '\\',
  '"',
  "'; DROP TABLE agents; --",
  '@hx.bob',
  '@hx.*',
  '@Hx.bob',
  'mon_x',
  ZERO_ID,
  '01ARZ3NDEKTSV4RRFFQ69G5FAV',
  'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
  'sch_01ARZ3NDEKTSV4RRFFQ69G5FAV',
  'data:,x',
  'true',
  'null',
  '1e309',
];

const hugeString = fc.oneof(
  fc.integer({ min: 1_000, max: 200_000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom(MiB - 200, MiB + 10, 2 * MiB).map((n) => 'y'.repeat(n)),
  fc.integer({ min: 100, max: 20_000 }).map((n) => '\u0000'.repeat(n)),
  fc.integer({ min: 100, max: 20_000 }).map((n) => '🦜'.repeat(n)),
);
const hugeArray = fc.oneof(
  fc.integer({ min: 100, max: 30_000 }).map((n) => new Array<number>(n).fill(1)),
  fc.integer({ min: 100, max: 5_000 }).map((n) => new Array<string>(n).fill('@hx.bob')),
  fc.integer({ min: 100, max: 5_000 }).map((n) => Array.from({ length: n }, () => ({ type: 'text', text: 'x' }))),
);
/** Nested arrays/objects around a value (past and below the 1000-level JSON depth limit). */
const deep = fc
  .tuple(fc.integer({ min: 2, max: 3_000 }), fc.boolean(), fc.jsonValue({ maxDepth: 1 }))
  .map(([depth, arrays, inner]) => {
    let value: unknown = inner;
    for (let i = 0; i < depth; i++) value = arrays ? [value] : { a: value };
    return value;
  });
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 4 },
  { arbitrary: fc.constantFrom(...TRICKY_STRINGS), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 3 },
  {
    arbitrary: fc.constantFrom(null, true, false, 0, -1, -0, 1.5, 2 ** 53, -(2 ** 63), 1e308, Number.MIN_VALUE),
    weight: 3,
  },
  { arbitrary: fc.integer(), weight: 1 },
  { arbitrary: fc.double(), weight: 1 },
  { arbitrary: hugeString, weight: 1 },
  { arbitrary: hugeArray, weight: 1 },
  { arbitrary: deep, weight: 1 },
  // Fresh objects every time: a later mutation may write into them, and a shared constant would
  // carry that into every following input.
  {
    arbitrary: fc
      .nat(5)
      .map((i) =>
        [
          () => ({}),
          () => [],
          () => [null],
          () => [[]],
          () => Object.create(null) as object,
          () => ({ constructor: { prototype: 1 } }),
        ][i](),
      ),
    weight: 1,
  },
);

type Path = Array<string | number>;

/** Every path into a JSON value (objects and arrays), the root included. */
function pathsOf(value: unknown, prefix: Path = [], into: Path[] = []): Path[] {
  into.push(prefix);
  // Only the first elements of a (possibly huge, possibly deep) array or object, and not too deep.
  if (prefix.length > 8) return into;
  if (Array.isArray(value)) value.slice(0, 8).forEach((item, i) => pathsOf(item, [...prefix, i], into));
  else if (value && typeof value === 'object')
    for (const [key, item] of Object.entries(value).slice(0, 16)) pathsOf(item, [...prefix, key], into);
  return into;
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/**
 * `JSON.stringify`, also for values nested deeper than the stack allows (stacked `wrap` mutations
 * around a `deep` value reach several thousand levels, past what JSON.stringify recurses through
 * under jest): plain data only, as the arbitraries make it.
 */
function toJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
  }
  const out: string[] = [];
  const skipped = (item: unknown) => item === undefined || typeof item === 'function' || typeof item === 'symbol';
  type Frame = { items: Array<[string | null, unknown]>; next: number; close: string };
  const stack: Frame[] = [];
  const open = (item: unknown): void => {
    if (item !== null && typeof item === 'object') {
      const array = Array.isArray(item);
      const items: Array<[string | null, unknown]> = array
        ? (item as unknown[]).map((element) => [null, skipped(element) ? null : element])
        : Object.keys(item)
            .filter((key) => !skipped((item as Record<string, unknown>)[key]))
            .map((key) => [key, (item as Record<string, unknown>)[key]]);
      out.push(array ? '[' : '{');
      stack.push({ items, next: 0, close: array ? ']' : '}' });
    } else out.push(JSON.stringify(item));
  };
  if (skipped(value)) return undefined;
  open(value);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    if (frame.next === frame.items.length) {
      out.push(frame.close);
      stack.pop();
      continue;
    }
    const [key, item] = frame.items[frame.next];
    if (frame.next++ > 0) out.push(',');
    if (key !== null) out.push(`${JSON.stringify(key)}:`);
    open(item);
  }
  return out.join('');
}

function parentOf(
  root: unknown,
  path: Path,
): [Record<string | number, unknown> | unknown[], string | number] | undefined {
  if (path.length === 0) return undefined;
  let node = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  return [node, path[path.length - 1]];
}

type JsonMutation =
  | { kind: 'restring'; at: number; value: string }
  | { kind: 'drop'; at: number }
  | { kind: 'set'; at: number; value: unknown }
  | { kind: 'add'; at: number; key: string; value: unknown }
  | { kind: 'wrap'; at: number; arrays: boolean; depth: number };

/** Strings that are still strings: the mutations a valid body may survive (unicode, NULs, SQL). */
const benignString = fc.oneof(
  fc.constantFrom(...TRICKY_STRINGS.filter((v) => v !== '')),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }),
  fc.integer({ min: 1_000, max: 50_000 }).map((n) => '🦜'.repeat(n)),
);

const jsonMutation: fc.Arbitrary<JsonMutation> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('restring' as const), at: fc.nat(), value: benignString }), weight: 2 },
  fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: hostileValue }),
  fc.record({
    kind: fc.constant('add' as const),
    at: fc.nat(),
    key: fc.oneof(
      fc.constantFrom('from', 'id', '__proto__', 'constructor', '', '\u0000', 'x'.repeat(1000)),
      fc.string({ maxLength: 12 }),
    ),
    value: hostileValue,
  }),
  fc.record({
    kind: fc.constant('wrap' as const),
    at: fc.nat(),
    arrays: fc.boolean(),
    depth: fc.integer({ min: 1, max: 1_500 }),
  }),
);

/** Paths to the string leaves of a value. */
const stringPaths = (root: unknown) =>
  pathsOf(root).filter((path) => {
    let node: unknown = root;
    for (const key of path) node = (node as Record<string | number, unknown>)[key];
    return typeof node === 'string';
  });

function applyMutation(root: Record<string, unknown>, mutation: JsonMutation): Record<string, unknown> {
  const paths = pathsOf(root);
  const path = paths[mutation.at % paths.length];
  const place = parentOf(root, path);
  switch (mutation.kind) {
    case 'restring': {
      const strings = stringPaths(root);
      if (strings.length === 0) return root;
      const [node, key] = parentOf(root, strings[mutation.at % strings.length])!;
      (node as Record<string | number, unknown>)[key] = mutation.value;
      return root;
    }
    case 'drop':
      if (!place) return {};
      if (Array.isArray(place[0])) place[0].splice(place[1] as number, 1);
      else delete place[0][place[1]];
      return root;
    case 'set':
      if (!place) {
        const value = mutation.value;
        return (value && typeof value === 'object' && !Array.isArray(value) ? value : { value }) as Record<
          string,
          unknown
        >;
      }
      (place[0] as Record<string | number, unknown>)[place[1]] = mutation.value;
      return root;
    case 'add': {
      let node: unknown = root;
      for (const key of path) node = (node as Record<string | number, unknown>)[key];
      const value = mutation.value;
      if (node && typeof node === 'object' && !Array.isArray(node))
        Object.defineProperty(node, mutation.key, { value, enumerable: true, configurable: true, writable: true });
      else if (Array.isArray(node)) node.push(value);
      return root;
    }
    case 'wrap': {
      if (!place) return root;
      let value = (place[0] as Record<string | number, unknown>)[place[1]];
      for (let i = 0; i < mutation.depth; i++) value = mutation.arrays ? [value] : { v: value };
      (place[0] as Record<string | number, unknown>)[place[1]] = value;
      return root;
    }
  }
}

/** Byte-level damage to a JSON text: duplicate keys, invalid UTF-8, truncation, stray bytes. */
type TextMutation =
  | { kind: 'duplicate-key'; key: number; value: unknown }
  | { kind: 'invalid-utf8'; at: number; bytes: number[] }
  | { kind: 'truncate'; at: number }
  | { kind: 'insert'; at: number; bytes: number[] }
  | { kind: 'utf16' }
  | { kind: 'bom' };

const INVALID_UTF8 = [
  [0xff],
  [0xfe],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf0, 0x9f, 0xa6],
  [0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xc3],
];
const textMutation: fc.Arbitrary<TextMutation> = fc.oneof(
  fc.record({ kind: fc.constant('duplicate-key' as const), key: fc.nat(), value: hostileValue }),
  fc.record({ kind: fc.constant('invalid-utf8' as const), at: fc.nat(), bytes: fc.constantFrom(...INVALID_UTF8) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.nat(),
    bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 8 }),
  }),
  fc.constant({ kind: 'utf16' as const }),
  fc.constant({ kind: 'bom' as const }),
);

function applyText(body: Record<string, unknown>, mutation: TextMutation): Buffer {
  const text = toJson(body) ?? 'null';
  const bytes = Buffer.from(text, 'utf8');
  switch (mutation.kind) {
    case 'duplicate-key': {
      const keys = Object.keys(body);
      if (keys.length === 0 || !text.startsWith('{')) return bytes;
      const key = keys[mutation.key % keys.length];
      return Buffer.from(`{${JSON.stringify(key)}:${toJson(mutation.value) ?? 'null'},${text.slice(1)}`, 'utf8');
    }
    case 'invalid-utf8': {
      // Inside a string when there is one: the JSON is otherwise well-formed.
      const quote = text.indexOf('"', mutation.at % Math.max(1, text.length));
      const at = quote === -1 ? mutation.at % (bytes.length + 1) : Buffer.byteLength(text.slice(0, quote + 1));
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(mutation.bytes), bytes.subarray(at)]);
    }
    case 'truncate':
      return bytes.subarray(0, mutation.at % (bytes.length + 1));
    case 'insert': {
      const at = mutation.at % (bytes.length + 1);
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(mutation.bytes), bytes.subarray(at)]);
    }
    case 'utf16':
      return Buffer.from(text, 'utf16le');
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
  }
}

/** A body derived from a valid one: mutated structurally, textually, or replaced outright. */
type BodyPlan =
  | { kind: 'valid' }
  | { kind: 'json'; mutations: JsonMutation[] }
  | { kind: 'text'; mutations: JsonMutation[]; text: TextMutation }
  | { kind: 'whole'; body: Buffer | string };

const bodyPlan: fc.Arbitrary<BodyPlan> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'valid' as const }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant('json' as const),
      mutations: fc.array(jsonMutation, { minLength: 1, maxLength: 3 }),
    }),
    weight: 8,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('text' as const),
      mutations: fc.array(jsonMutation, { maxLength: 1 }),
      text: textMutation,
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('whole' as const),
      body: fc.oneof(
        fc.jsonValue().map((v) => JSON.stringify(v) ?? ''),
        fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
        fc.constantFrom('', ' ', '\n', '{', '}', '[]', '{}{}', 'null', '"x"', '{"a":1,}', '\u0000', '{"a":"\\ud800"}'),
        fc.integer({ min: 1_001, max: 3_000 }).map((d) => '['.repeat(d) + ']'.repeat(d)),
      ),
    }),
    weight: 2,
  },
);

function materialize(valid: Record<string, unknown>, plan: BodyPlan): Buffer | string {
  switch (plan.kind) {
    case 'valid':
      return JSON.stringify(valid);
    case 'json':
      return toJson(plan.mutations.reduce((body, m) => applyMutation(body, m), clone(valid))) ?? '';
    case 'text':
      return applyText(
        plan.mutations.reduce((body, m) => applyMutation(body, m), clone(valid)),
        plan.text,
      );
    case 'whole':
      return plan.body;
  }
}

/** Query-string fragments as they go on the wire (already "encoded", or deliberately not). */
const rawFragment: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      '',
      '%',
      '%zz',
      '%00',
      '%0',
      '%%',
      '%E0%A4%A',
      '%ED%A0%80',
      '%C0%AF',
      '%FF%FE',
      '%2C',
      ',',
      ',,',
      '+',
      '%2B',
      '=',
      '==',
      ';',
      '..',
      '/',
      '%2F',
      '%5C',
      '%0D%0A',
      '%u0041',
      '%F0%9F%A6%9C',
      '[]',
      '{}',
      'null',
      'undefined',
      '-1',
      '01',
      '1e3',
      '0x10',
      '1.0',
      '9007199254740993',
      '%20',
      'true%00',
      'in%00',
      '%EF%BB%BF',
      '\u00e9',
      '🦜',
    ),
  },
  {
    weight: 3,
    arbitrary: fc
      .uint8Array({ minLength: 1, maxLength: 24 })
      .map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')),
  },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 16 }).map(enc) },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 16 }) },
  // Long values: past Node's 16 KiB header limit some are refused (431) before any route.
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => 'a'.repeat(n)) },
);

interface GetRoute {
  name: string;
  path: () => string;
  token: () => string | undefined;
  /** Known parameters and valid values; a route without any ignores its query entirely. */
  params: Record<string, () => string[]>;
}

function queryArb(route: GetRoute): fc.Arbitrary<string> {
  const names = Object.keys(route.params);
  const key =
    names.length > 0
      ? fc.oneof({ arbitrary: fc.constantFrom(...names), weight: 4 }, { arbitrary: rawFragment, weight: 1 })
      : rawFragment;
  const pair = fc
    .tuple(key, fc.nat(), fc.oneof(fc.constant(undefined), rawFragment), fc.boolean())
    .map(([name, pick, raw, bare]) => {
      const valid = Object.hasOwn(route.params, name) ? route.params[name]() : [];
      const value = raw ?? (valid.length > 0 ? valid[pick % valid.length] : '');
      return bare && raw === '' ? name : `${name}=${value}`;
    });
  return fc
    .tuple(fc.array(pair, { maxLength: 8 }), fc.constantFrom('?', '?', '?', '??', '?&', '?#'), fc.boolean())
    .map(([pairs, mark, repeat]) => {
      const all = repeat && pairs.length > 0 ? [...pairs, pairs[0]] : pairs;
      return all.length === 0 ? '' : `${mark}${all.join('&')}`;
    });
}

// ---------------------------------------------------------------------------------------------
// Setup, summary.
// ---------------------------------------------------------------------------------------------

async function upload(token: string, text: string): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([text], { type: 'text/plain' }), 'a.txt');
  const reply = await fetch(`${op.url}/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
  });
  if (reply.status !== 201) throw new Error(`upload: ${reply.status}`);
  return ((await reply.json()) as { id: string }).id;
}

beforeAll(async () => {
  console.log(`hostile-input: seeds ${SEEDS.join(', ')} (ROOST_FC_SEED=<one> replays it) ROOST_FC_SCALE=${SCALE}`);
  op = await startOperator({
    redis: true,
    env: {
      ROOST_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      ROOST_WS_MAX_CLIENT_FRAME_BYTES: String(MAX_CLIENT_FRAME),
      ROOST_SCHEDULES_PER_AGENT: '1000000',
      // No firing or purge may change the database behind the state checks.
      ROOST_SCHEDULE_TICK_MS: '3600000',
      ROOST_RETENTION_INTERVAL_MS: String(DAY),
    },
  });
  port = Number(new URL(op.url).port);
  db = new pg.Pool({ connectionString: op.config.databaseUrl!, max: 2 });
  const admin = op.adminToken;
  const hx = await op.client.post('/_admin/orgs', { name: 'hx' }, admin);
  fixture.hxAdmin = hx.body.admin_token;
  expect((await op.client.post('/_admin/orgs', { name: 'hy' }, admin)).status).toBe(201);
  fixture.alice = await op.agent('@hx.alice', { visibility: 'public' });
  fixture.bob = await op.agent('@hx.bob');
  fixture.carol = await op.agent('@hx.carol');
  await op.agent('@hx.dave');
  const e1 = envelope('@hx.bob', { subject: 'hello world' });
  expect((await op.client.post('/messages', e1, fixture.alice)).status).toBe(202);
  const e2 = envelope('@hx.alice', { subject: 'hello back' });
  expect((await op.client.post('/messages', e2, fixture.bob)).status).toBe(202);
  fixture.e1 = e1.id as string;
  fixture.e2 = e2.id as string;
  // Read both now, so that a hostile GET that happens to be valid changes nothing.
  expect((await op.client.get(`/messages/${fixture.e1}`, fixture.bob)).status).toBe(200);
  expect((await op.client.get(`/messages/${fixture.e2}`, fixture.alice)).status).toBe(200);
  fixture.f1 = await upload(fixture.alice, 'attachment');
  fixture.pool = [];
  for (let batch = 0; batch < Math.ceil(runs(600) / 3 / 20) + 1; batch++) {
    fixture.pool.push(...(await Promise.all(Array.from({ length: 20 }, () => upload(fixture.alice, 'pooled')))));
  }
  const schedule = await op.client.post(
    '/schedules',
    { envelope: { to: ['@hx.bob'], content_parts: [{ type: 'text', text: 'later' }] }, start_at: Date.now() + DAY },
    fixture.alice,
  );
  fixture.s1 = schedule.body.id;
  expect(fixture.s1).toMatch(/^sch_/);
});

afterAll(async () => {
  const width = Math.max(5, ...[...tried.keys()].map((k) => k.length));
  const total = [...tried.values()].reduce((sum, row) => sum + row.inputs, 0);
  const lines = [
    `hostile input (seeds ${SEEDS.join(', ')}, scale ${SCALE}): ${total} inputs over ${tried.size} routes`,
    `${'route'.padEnd(width)}  inputs      ms  statuses`,
    ...[...tried.entries()].map(
      ([route, row]) =>
        `${route.padEnd(width)}  ${String(row.inputs).padStart(6)}  ${String(elapsed.get(route) ?? '').padStart(6)}  ${[
          ...row.statuses.entries(),
        ]
          .sort()
          .map(([status, n]) => `${status}×${n}`)
          .join(' ')}`,
    ),
  ];
  console.log(lines.join('\n'));
  await db?.end();
  await op?.close();
});

// ---------------------------------------------------------------------------------------------
// JSON bodies: mutated from valid ones, on every route that reads a body.
// ---------------------------------------------------------------------------------------------

interface BodyRoute {
  name: string;
  method: string;
  path: () => string;
  token: () => string;
  /** A valid body; `n` makes ids and names fresh per input. */
  valid: (n: number) => Record<string, unknown>;
  success: number[];
  /** Tables a success may change, each with the largest row-count growth it may cause. */
  writes: Partial<Record<keyof TableDigests, number>>;
  numRuns: number;
}

let serial = 0;
/** A fresh, valid, deterministic envelope id (Crockford base32, `01` prefix). */
const freshId = (n: number) => `01J${String(n).padStart(23, '0')}`;

const BODY_ROUTES: BodyRoute[] = [
  {
    name: 'POST /messages',
    method: 'POST',
    path: () => '/messages',
    token: () => fixture.alice,
    valid: (n) => ({
      id: freshId(n),
      to: ['@hx.bob'],
      cc: ['@hx.carol'],
      subject: 'hello',
      in_reply_to: fixture.e2,
      references: [fixture.e2],
      date_ms: 1_747_000_000_000,
      content_parts: [
        { type: 'text', text: 'hi' },
        { type: 'data', schema: 'x', data: { k: [1, 2] } },
        { type: 'image', url: 'https://example.test/p.png', mime_type: 'image/png' },
        // Every third send attaches a fresh pending upload (a claimed one would always refuse).
        ...(n % 3 === 0
          ? [{ type: 'file', file_id: fixture.pool[Math.floor(n / 3) % fixture.pool.length], name: 'a.txt' }]
          : []),
      ],
      monitor: 'mon_fuzz',
    }),
    success: [202],
    writes: { envelopes: 1, mailbox_entries: 2, mailboxes: 0, files: 0 },
    numRuns: 600,
  },
  {
    name: 'POST /messages/{id}/receipts',
    method: 'POST',
    path: () => `/messages/${fixture.e2}/receipts`,
    token: () => fixture.alice,
    valid: (n) => ({ status: 'accepted', note: 'on it', id: freshId(n) }),
    success: [201],
    writes: { envelopes: 1, mailbox_entries: 1, mailboxes: 0 },
    numRuns: 220,
  },
  {
    name: 'POST /mailbox/read',
    method: 'POST',
    path: () => '/mailbox/read',
    token: () => fixture.bob,
    valid: () => ({ ids: [fixture.e1, '01ARZ3NDEKTSV4RRFFQ69G5FAV'] }),
    success: [200],
    // Read marks only (a mutated send may have put an unread envelope with a listed id in the mailbox).
    writes: { mailbox_entries: 0 },
    numRuns: 220,
  },
  {
    name: 'PATCH /agents/me',
    method: 'PATCH',
    path: () => '/agents/me',
    token: () => fixture.carol,
    valid: () => ({ display_name: 'Carol', description: 'desc', card_body: '# card' }),
    success: [200],
    writes: { agents: 0 },
    numRuns: 220,
  },
  {
    name: 'POST /agents/me/allowlist',
    method: 'POST',
    path: () => '/agents/me/allowlist',
    token: () => fixture.carol,
    valid: () => ({ entries: ['@hx.*', '@zz.y'] }),
    success: [200],
    writes: { agents: 0 },
    numRuns: 220,
  },
  {
    name: 'POST /agents/me/blocks',
    method: 'POST',
    path: () => '/agents/me/blocks',
    token: () => fixture.carol,
    valid: () => ({ handle: '@zz.pest' }),
    success: [201],
    writes: { blocks: 1 },
    numRuns: 220,
  },
  {
    name: 'POST /schedules',
    method: 'POST',
    path: () => '/schedules',
    token: () => fixture.alice,
    valid: () => ({
      envelope: { to: ['@hx.bob'], subject: 'weekly', content_parts: [{ type: 'text', text: 'report' }] },
      interval_ms: 3_600_000,
      start_at: Date.now() + DAY,
      max_count: 3,
      end_at: Date.now() + 10 * DAY,
    }),
    success: [201],
    writes: { schedules: 1 },
    numRuns: 300,
  },
  {
    name: 'PATCH /schedules/{id}',
    method: 'PATCH',
    path: () => `/schedules/${fixture.s1}`,
    token: () => fixture.alice,
    valid: (n) => ({ status: n % 2 === 0 ? 'paused' : 'active' }),
    success: [200],
    writes: { schedules: 0 },
    numRuns: 150,
  },
  {
    name: 'POST /_admin/agents',
    method: 'POST',
    path: () => '/_admin/agents',
    token: () => op.adminToken,
    valid: (n) => ({
      handle: `@hx.n${n}`,
      policy: 'open',
      display_name: 'New',
      description: null,
      card_body: 'card',
      visibility: 'private',
      content_guard: 'warn',
      retention_days: 30,
    }),
    success: [201],
    writes: { agents: 1, mailboxes: 1 },
    numRuns: 300,
  },
  {
    name: 'PATCH /_admin/agents/{handle}',
    method: 'PATCH',
    path: () => `/_admin/agents/${enc('@hx.dave')}`,
    token: () => fixture.hxAdmin,
    valid: () => ({
      policy: 'open',
      display_name: 'Dave',
      description: 'd',
      card_body: null,
      visibility: 'public',
      content_guard: 'warn',
      retention_days: 365,
    }),
    success: [200],
    writes: { agents: 0 },
    numRuns: 220,
  },
  {
    name: 'POST /_admin/orgs',
    method: 'POST',
    path: () => '/_admin/orgs',
    token: () => op.adminToken,
    valid: (n) => ({ name: `o${n}`, retention_days: 10, content_guard: 'warn', max_agents: 5 }),
    success: [201],
    writes: { orgs: 1 },
    numRuns: 220,
  },
  {
    name: 'PATCH /_admin/orgs/{name}',
    method: 'PATCH',
    path: () => '/_admin/orgs/hy',
    token: () => op.adminToken,
    valid: () => ({ retention_days: 30, content_guard: 'block', max_agents: 10 }),
    success: [200],
    writes: { orgs: 0 },
    numRuns: 150,
  },
];

describe('JSON bodies: mutated valid bodies get a 2xx that writes only what the route may, or a precise 4xx that writes nothing', () => {
  it.each(BODY_ROUTES.map((route) => [route.name, route] as const))('%s', async (_name, route) => {
    let state = await digests(db);
    await check(route.name, bodyPlan, runs(route.numRuns), async (plan) => {
      const input: HttpInput = {
        method: route.method,
        target: route.path(),
        token: route.token(),
        headers: [['Content-Type', 'application/json']],
        body: materialize(route.valid(++serial), plan),
      };
      const response = await send(input);
      judge(route.name, input, response, { success: route.success });
      const after = await digests(db);
      const changed = changes(state, after);
      state = after;
      const what = `${route.name}: ${describeInput(input)} → ${response.status}`;
      if (response.status! >= 400) {
        if (Object.keys(changed).length > 0) throw new Error(`a refusal changed ${JSON.stringify(changed)}: ${what}`);
        return;
      }
      for (const [table, delta] of Object.entries(changed)) {
        const limit = route.writes[table as keyof TableDigests];
        if (limit === undefined || delta < 0 || delta > limit)
          throw new Error(`a success changed ${table} by ${delta}: ${what}`);
      }
    });
    await expectHealthy();
  });

  it('the Content-Type is not checked (ASMTP.md §3.0): a valid body under any Content-Type is served', async () => {
    const name = 'POST /mailbox/read × Content-Type';
    const contentType = fc.oneof(
      fc.constantFrom(
        '',
        ';',
        'a;b',
        '/',
        'application/json',
        'text/plain; charset=latin1',
        'multipart/form-data',
        'application/json; charset=utf-16',
        '*/*',
        'x/y; ;;',
      ),
      fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
    );
    await readOnlyBatch(() =>
      check(name, fc.tuple(contentType, fc.boolean()), runs(100), async ([type, bearer]) => {
        const input: HttpInput = {
          method: 'POST',
          target: '/mailbox/read',
          token: bearer ? fixture.bob : undefined,
          headers: [['Content-Type', type]],
          body: JSON.stringify({ ids: [fixture.e1] }),
        };
        const response = await send(input);
        judge(name, input, response, { success: [200] });
        const expected = bearer ? 200 : 401;
        if (response.status !== expected && !parserRefusal(response)) {
          throw new Error(
            `expected ${expected}: Content-Type ${JSON.stringify(type)} → ${response.status} ${response.body.toString('utf8')}`,
          );
        }
      }),
    );
  });

  it('every JSON route refuses bodies without a bearer before reading them: 401, nothing changes', async () => {
    const name = 'JSON routes without a bearer';
    await readOnlyBatch(() =>
      check(
        name,
        fc.tuple(
          fc.constantFrom(...BODY_ROUTES),
          bodyPlan,
          fc.constantFrom(undefined, '', 'x', '\u00ff', 'Bearer', `${'t'.repeat(500)}`),
        ),
        runs(150),
        async ([route, plan, token]) => {
          const input: HttpInput = {
            method: route.method,
            target: route.path(),
            token,
            body: materialize(route.valid(++serial), plan),
          };
          const response = await send(input);
          judge(name, input, response, { success: [] });
          const code = JSON.parse(response.body.toString('utf8')).error.code;
          // Past the 64 MiB hard cap the body is refused while it streams in, before authentication.
          const hardCap = input.body!.length > 64 * MiB && response.status === 413;
          if (!hardCap && (response.status !== 401 || code !== 'UNAUTHORIZED')) {
            throw new Error(`expected 401 UNAUTHORIZED: ${describeInput(input)} → ${response.status} ${code}`);
          }
        },
      ),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Uploads: mutated multipart bodies.
// ---------------------------------------------------------------------------------------------

describe('POST /files: mutated multipart bodies', () => {
  const partArb = fc.record({
    boundary: fc.oneof(
      { arbitrary: fc.constant('b0undary'), weight: 6 },
      fc.constantFrom('', '"quoted"', 'x'.repeat(200), 'é', '--', ' ', 'a;b'),
      fc.string({ maxLength: 20 }),
    ),
    declared: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 6 },
      fc.constantFrom(
        'multipart/form-data',
        'MULTIPART/FORM-DATA; boundary=b0undary',
        'text/plain',
        'application/json',
        '',
      ),
    ),
    name: fc.oneof(
      { arbitrary: fc.constant('file'), weight: 6 },
      fc.constantFrom('', 'files', 'FILE', '"file"', 'file\u0000'),
      fc.string({ maxLength: 10 }),
    ),
    filename: fc.oneof(
      { arbitrary: fc.constant('a.txt'), weight: 4 },
      fc.constant(undefined),
      fc.constantFrom('', '../../etc/passwd', '..', 'a"b.txt', '\u0000', '🦜.png', 'x'.repeat(500)),
      fc.string({ unit: 'binary', maxLength: 30 }),
    ),
    type: fc.oneof(
      { arbitrary: fc.constant('text/plain'), weight: 4 },
      fc.constant(undefined),
      fc.constantFrom(
        'image/png',
        'application/pdf',
        'image/gif',
        'image/jpeg',
        'application/x-evil',
        'TEXT/PLAIN; charset=utf-8',
        '',
      ),
    ),
    content: fc.oneof(
      { arbitrary: fc.constant(Buffer.from('hello')), weight: 12 },
      { arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)), weight: 4 },
      {
        arbitrary: fc.constantFrom(
          Buffer.alloc(0),
          Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
          Buffer.from('%PDF-1.4'),
        ),
        weight: 4,
      },
      { arbitrary: fc.constant(Buffer.alloc(10 * MiB + 1, 0x61)), weight: 1 },
    ),
    closing: fc.boolean(),
    garbage: fc.oneof(
      { arbitrary: fc.constant(Buffer.alloc(0)), weight: 6 },
      fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
    ),
  });

  it('201 for a valid upload (one files row), a precise 4xx for the rest (nothing written)', async () => {
    const name = 'POST /files';
    let state = await digests(db);
    await check(name, partArb, runs(300), async (part) => {
      const head =
        `--${part.boundary}\r\nContent-Disposition: form-data; name="${part.name}"` +
        `${part.filename === undefined ? '' : `; filename="${part.filename}"`}\r\n` +
        `${part.type === undefined ? '' : `Content-Type: ${part.type}\r\n`}\r\n`;
      const body = Buffer.concat([
        part.garbage,
        Buffer.from(head, 'utf8'),
        part.content,
        Buffer.from(part.closing ? `\r\n--${part.boundary}--\r\n` : '', 'utf8'),
      ]);
      const contentType = part.declared ?? `multipart/form-data; boundary=${part.boundary}`;
      const input: HttpInput = {
        method: 'POST',
        target: '/files',
        token: fixture.alice,
        headers: [['Content-Type', contentType.replace(/[\r\n]/g, '')]],
        body,
      };
      const response = await send(input);
      judge(name, input, response, { success: [201], closed: /[^\t\x20-\x7e\x80-\xff]/.test(contentType) });
      const after = await digests(db);
      const changed = changes(state, after);
      state = after;
      const expected = response.status === 201 ? { files: 1 } : {};
      if (JSON.stringify(changed) !== JSON.stringify(expected))
        throw new Error(`${describeInput(input)} → ${response.status} changed ${JSON.stringify(changed)}`);
    });
    await expectHealthy();
  });
});

// ---------------------------------------------------------------------------------------------
// Query strings on every GET route.
// ---------------------------------------------------------------------------------------------

const GET_ROUTES: GetRoute[] = [
  {
    name: 'GET /mailbox',
    path: () => '/mailbox',
    token: () => fixture.alice,
    params: {
      direction: () => ['in', 'out', 'both'],
      order: () => ['asc', 'desc'],
      limit: () => ['1', '100', '1000', ''],
      unread: () => ['true', 'false'],
      after_created_at: () => ['0', String(Date.now())],
      after_envelope_id: () => [fixture.e1, ZERO_ID],
    },
  },
  // The console's routes (docs/console-api.md); the live feed (an endless 200) is not fuzzed here.
  {
    name: 'GET /_admin/agents',
    path: () => '/_admin/agents',
    token: () => op.adminToken,
    params: {
      q: () => ['hx', 'ALICE', '%', ''],
      limit: () => ['1', '50', '200', ''],
      after: () => [enc('@hx.alice'), '@hx.a', ''],
      include: () => ['unread', ''],
    },
  },
  {
    name: 'GET /_admin/agents/{handle}/mailbox',
    path: () => `/_admin/agents/${enc('@hx.alice')}/mailbox`,
    token: () => fixture.hxAdmin,
    params: {
      direction: () => ['in', 'out', 'both'],
      order: () => ['asc', 'desc'],
      limit: () => ['1', '100', '1000', ''],
      unread: () => ['true', 'false'],
      after_created_at: () => ['0', String(Date.now())],
      after_envelope_id: () => [fixture.e1, ZERO_ID],
    },
  },
  {
    name: 'GET /messages?ids=',
    path: () => '/messages',
    token: () => fixture.alice,
    params: { ids: () => [`${fixture.e1},${fixture.e2}`, fixture.e2, `${fixture.e2},${fixture.e2}`] },
  },
  ...['/search', '/search/agents', '/search/messages'].map((path): GetRoute => ({
    name: `GET ${path}`,
    path: () => path,
    token: () => fixture.alice,
    params: {
      q: () => ['hx', 'alice', 'hello', 'hello%20world'],
      limit: () => ['1', '20', '50'],
      cursor: () => [Buffer.from('@hx.a').toString('base64url'), ''],
    },
  })),
  {
    name: 'GET /agents/me/blocks',
    path: () => '/agents/me/blocks',
    token: () => fixture.carol,
    params: { limit: () => ['1', '100', '5x'], cursor: () => [Buffer.from('{"offset":1}').toString('base64'), ''] },
  },
  ...(
    [
      ['GET /agents/me', () => '/agents/me', () => fixture.alice],
      ['GET /agents/me/allowlist', () => '/agents/me/allowlist', () => fixture.alice],
      ['GET /agents/{owner}/{name}', () => '/agents/hx/alice', () => fixture.bob],
      ['GET /agents/{owner}/{name}/card', () => '/agents/hx/alice/card', () => fixture.bob],
      ['GET /messages/{id}', () => `/messages/${fixture.e2}`, () => fixture.alice],
      ['GET /messages/{id}/receipts', () => `/messages/${fixture.e1}/receipts`, () => fixture.alice],
      ['GET /messages/{id}/status', () => `/messages/${fixture.e1}/status`, () => fixture.alice],
      ['GET /files/{id}', () => `/files/${fixture.f1}`, () => fixture.alice],
      ['GET /schedules', () => '/schedules', () => fixture.alice],
      ['GET /schedules/{id}', () => `/schedules/${fixture.s1}`, () => fixture.alice],
      ['GET /_admin/agents/{handle}', () => `/_admin/agents/${enc('@hx.carol')}`, () => op.adminToken],
      ['GET /_admin/orgs', () => '/_admin/orgs', () => op.adminToken],
      ['GET /_admin/whoami', () => '/_admin/whoami', () => fixture.hxAdmin],
      ['GET /_admin/overview', () => '/_admin/overview', () => op.adminToken],
      [
        'GET /_admin/agents/{handle}/messages/{id}',
        () => `/_admin/agents/${enc('@hx.alice')}/messages/${fixture.e2}`,
        () => fixture.hxAdmin,
      ],
      [
        'GET /_admin/agents/{handle}/files/{id}',
        () => `/_admin/agents/${enc('@hx.alice')}/files/${fixture.f1}`,
        () => fixture.hxAdmin,
      ],
      [
        'GET /_admin/agents/{handle}/schedules',
        () => `/_admin/agents/${enc('@hx.alice')}/schedules`,
        () => fixture.hxAdmin,
      ],
      ['GET /_admin/orgs/{name}', () => '/_admin/orgs/hx', () => op.adminToken],
      ['GET /healthz', () => '/healthz', () => undefined],
      ['GET /health', () => '/health', () => undefined],
      ['GET /readyz', () => '/readyz', () => undefined],
      ['GET /metrics', () => '/metrics', () => undefined],
    ] as const
  ).map(([name, path, token]): GetRoute => ({ name, path, token, params: {} })),
];

/** The HTTP parser's own refusals (bytes no request line may hold, a request line over the limit). */
const parserRefusal = (response: RawResponse) =>
  response.status === 431 || (response.status === 400 && response.body.includes('malformed HTTP request'));

describe('query strings: odd bytes, percent-encodings, repeats and long values on every GET route', () => {
  it.each(GET_ROUTES.map((route) => [route.name, route] as const))('%s', async (_name, route) => {
    await readOnlyBatch(() =>
      check(route.name, queryArb(route), runs(Object.keys(route.params).length > 0 ? 300 : 80), async (query) => {
        const input: HttpInput = { method: 'GET', target: `${route.path()}${query}`, token: route.token() };
        const response = await send(input);
        judge(route.name, input, response, { success: [200] });
        // A route without parameters ignores its query: anything the HTTP parser accepts is a 200.
        if (Object.keys(route.params).length === 0 && response.status !== 200 && !parserRefusal(response)) {
          throw new Error(
            `a parameterless route refused its query: ${describeInput(input)} → ${response.status} ${response.body.toString('utf8')}`,
          );
        }
      }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Path parameters of the routes that write, with a valid bearer (and a valid body where one is read).
// ---------------------------------------------------------------------------------------------

interface PathRoute {
  name: string;
  method: string;
  target: (segment: string) => string;
  token: () => string;
  body?: () => Record<string, unknown>;
  /** Tables a success may change (by at most one row). */
  writes: Array<keyof TableDigests>;
}

/**
 * Path segments: hostile, or plausible but never naming a fixture (organizations hx and hy and
 * their agents). They may name what an earlier fuzzed request created (an organization `null`).
 */
const writeSegment = fc
  .oneof(
    { arbitrary: rawFragment, weight: 4 },
    fc.constantFrom(
      '%40zz.gone',
      '@zz.gone',
      '%40zz.%2A',
      '@zz.*',
      '%40ZZ.gone',
      'sch_01ARZ3NDEKTSV4RRFFQ69G5FAV',
      'sch_x',
      '01ARZ3NDEKTSV4RRFFQ69G5FAV',
      'zzorg',
      'x'.repeat(2_049),
      '.',
      '..',
      '%2e%2e',
      '%2F',
    ),
  )
  .filter((segment) => !/h[xy]/i.test(segment));
/** What deleting an agent or an organization takes with it. */
const CASCADE: Array<keyof TableDigests> = [
  'orgs',
  'agents',
  'blocks',
  'mailboxes',
  'envelopes',
  'mailbox_entries',
  'files',
  'schedules',
  'retention_marks',
];

const PATH_ROUTES: PathRoute[] = [
  {
    name: 'DELETE /agents/me/allowlist/{entry}',
    method: 'DELETE',
    target: (x) => `/agents/me/allowlist/${x}`,
    token: () => fixture.carol,
    writes: ['agents'],
  },
  {
    name: 'DELETE /agents/me/blocks/{handle}',
    method: 'DELETE',
    target: (x) => `/agents/me/blocks/${x}`,
    token: () => fixture.carol,
    writes: ['blocks'],
  },
  {
    name: 'PATCH /schedules/{id} (path)',
    method: 'PATCH',
    target: (x) => `/schedules/${x}`,
    token: () => fixture.alice,
    body: () => ({ status: 'paused' }),
    writes: ['schedules'],
  },
  {
    name: 'DELETE /schedules/{id}',
    method: 'DELETE',
    target: (x) => `/schedules/${x}`,
    token: () => fixture.alice,
    writes: ['schedules'],
  },
  {
    name: 'POST /messages/{id}/receipts (path)',
    method: 'POST',
    target: (x) => `/messages/${x}/receipts`,
    token: () => fixture.alice,
    body: () => ({ status: 'accepted' }),
    writes: ['envelopes', 'mailbox_entries', 'mailboxes'],
  },
  {
    name: 'PATCH /_admin/agents/{handle} (path)',
    method: 'PATCH',
    target: (x) => `/_admin/agents/${x}`,
    token: () => fixture.hxAdmin,
    body: () => ({ display_name: 'x' }),
    writes: ['agents'],
  },
  {
    name: 'POST /_admin/agents/{handle}/rotate-token',
    method: 'POST',
    target: (x) => `/_admin/agents/${x}/rotate-token`,
    token: () => op.adminToken,
    writes: ['agents'],
  },
  {
    name: 'DELETE /_admin/agents/{handle}',
    method: 'DELETE',
    target: (x) => `/_admin/agents/${x}`,
    token: () => op.adminToken,
    writes: CASCADE,
  },
  {
    name: 'PATCH /_admin/orgs/{name} (path)',
    method: 'PATCH',
    target: (x) => `/_admin/orgs/${x}`,
    token: () => op.adminToken,
    body: () => ({ max_agents: 3 }),
    writes: ['orgs'],
  },
  {
    name: 'POST /_admin/orgs/{name}/rotate-token',
    method: 'POST',
    target: (x) => `/_admin/orgs/${x}/rotate-token`,
    token: () => op.adminToken,
    writes: ['orgs'],
  },
  {
    name: 'DELETE /_admin/orgs/{name}',
    method: 'DELETE',
    target: (x) => `/_admin/orgs/${x}`,
    token: () => op.adminToken,
    writes: CASCADE,
  },
];

describe('path parameters of the write routes, with a valid bearer', () => {
  it.each(PATH_ROUTES.map((route) => [route.name, route] as const))('%s', async (_name, route) => {
    let state = await digests(db);
    await check(route.name, writeSegment, runs(60), async (segment) => {
      const input: HttpInput = {
        method: route.method,
        target: route.target(segment),
        token: route.token(),
        body: route.body ? JSON.stringify(route.body()) : undefined,
      };
      const response = await send(input);
      judge(route.name, input, response, { success: [200, 201, 204] });
      const after = await digests(db);
      const changed = changes(state, after);
      state = after;
      const allowed = response.status! < 400 ? route.writes : [];
      for (const [table, delta] of Object.entries(changed)) {
        if (!allowed.includes(table as keyof TableDigests) || (allowed !== CASCADE && Math.abs(delta) > 1)) {
          throw new Error(`${describeInput(input)} → ${response.status} changed ${table} by ${delta}`);
        }
      }
    });
    await expectHealthy();
  });
});

// ---------------------------------------------------------------------------------------------
// Paths, methods and headers.
// ---------------------------------------------------------------------------------------------

const TEMPLATES = [
  '/messages',
  '/messages/{id}',
  '/messages/{id}/receipts',
  '/messages/{id}/status',
  '/mailbox',
  '/mailbox/read',
  '/files',
  '/files/{id}',
  '/agents/me',
  '/agents/me/allowlist',
  '/agents/me/allowlist/{entry}',
  '/agents/me/blocks',
  '/agents/me/blocks/{handle}',
  '/agents/{owner}/{name}',
  '/agents/{owner}/{name}/card',
  '/search',
  '/search/agents',
  '/search/messages',
  '/schedules',
  '/schedules/{id}',
  '/_admin/agents',
  '/_admin/agents/{handle}',
  '/_admin/agents/{handle}/rotate-token',
  '/_admin/orgs',
  '/_admin/orgs/{name}',
  '/_admin/orgs/{name}/rotate-token',
  '/healthz',
  '/readyz',
  '/metrics',
  '/connect',
];
const segmentArb = fc.oneof(
  rawFragment,
  fc.constantFrom(
    '%40hx.bob',
    '@hx.bob',
    '%40hx.%2A',
    'me',
    '..',
    '.',
    '',
    '%2e%2e',
    'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
    'sch_x',
    'x'.repeat(2049),
  ),
);
const pathArb = fc
  .tuple(
    fc.constantFrom(...TEMPLATES),
    fc.array(segmentArb, { minLength: 1, maxLength: 4 }),
    fc.constantFrom('', '/', '//', '/extra', '%2F', '?', '#x', '/..'),
    fc.boolean(),
  )
  .map(([template, segments, suffix, upper]) => {
    let i = 0;
    const path = template.replace(/\{[^}]+\}/g, () => segments[i++ % segments.length]) + suffix;
    return upper ? path.toUpperCase() : path;
  });
const methodArb = fc.oneof(
  fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'PUT', 'TRACE', 'POST', 'PATCH', 'DELETE', 'get', 'PROPFIND', 'M-SEARCH'),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 8 }),
);

describe('paths, methods and headers', () => {
  it('odd paths and methods: a precise 4xx or a 200 on a readable route; never a 5xx, nothing changes', async () => {
    const name = 'odd paths × methods';
    await readOnlyBatch(() =>
      check(
        name,
        fc.tuple(methodArb, pathArb, fc.constantFrom<'none' | 'agent' | 'admin'>('none', 'agent', 'admin')),
        runs(1_000),
        async ([method, path, who]) => {
          // Writes only without a usable bearer: a hostile path must not reach a write that succeeds.
          const writes = !['GET', 'HEAD', 'OPTIONS', 'TRACE'].includes(method);
          const token = writes || who === 'none' ? undefined : who === 'agent' ? fixture.carol : op.adminToken;
          const input: HttpInput = { method, target: path.startsWith('/') ? path : `/${path}`, token };
          const response = await send(input);
          // CONNECT-like or unparsable request lines may simply be dropped by the HTTP parser.
          judge(name, input, response, { success: method === 'GET' ? [200] : [], closed: !/^[A-Z]+$/.test(method) });
        },
      ),
    );
  });

  it('hostile Authorization and other headers: 401 (or the parser’s 400/431), never a 5xx, nothing changes', async () => {
    const name = 'hostile headers';
    const authorization = fc.oneof(
      fc.constantFrom(
        '',
        'Bearer',
        'Bearer ',
        'bearer  x',
        'BEARER\tx',
        'Basic YTpi',
        'Bearer a b',
        `Bearer ${'x'.repeat(20_000)}`,
        'Bearer \u00ff\u00fe',
        'Bearer %00',
        'Bearer null',
      ),
      fc.string({ unit: 'grapheme-ascii', maxLength: 60 }).map((s) => `Bearer ${s}`),
      fc.uint8Array({ maxLength: 40 }).map((b) => `Bearer ${Buffer.from(b).toString('latin1')}`),
    );
    const extra = fc.array(
      // (Content-Length and Transfer-Encoding are broken in 'raw garbage' below: a length never
      // delivered costs a full request timeout per input.)
      fc.tuple(
        fc.constantFrom(
          'Authorization',
          'Content-Type',
          'Host',
          'X-Forwarded-For',
          'Expect',
          'Upgrade',
          'Cookie',
          'Accept-Encoding',
        ),
        rawFragment,
      ),
      { maxLength: 3 },
    );
    await readOnlyBatch(() =>
      check(
        name,
        fc.tuple(
          fc.constantFrom('/mailbox', '/agents/me', '/_admin/agents', '/schedules', '/search?q=hx'),
          authorization,
          extra,
        ),
        runs(500),
        async ([target, auth, headers]) => {
          const input: HttpInput = { method: 'GET', target, headers: [['Authorization', auth], ...headers] };
          const response = await rawHttp(build(input), { timeoutMs: REQUEST_TIMEOUT_MS * 4 });
          // A Content-Length the request never delivers ends in the 408 of the request timeout.
          judge(name, input, response, { success: [], closed: true });
          if (response.status !== undefined && ![400, 401, 408, 413, 417, 431].includes(response.status)) {
            throw new Error(
              `expected 401 or a parser refusal: ${describeInput(input)} ${JSON.stringify(headers)} → ${response.status} ${response.body.toString('utf8')}`,
            );
          }
        },
      ),
    );
  });

  it('raw garbage and broken HTTP framing: a 4xx with the ASMTP body or a closed socket', async () => {
    const name = 'raw HTTP garbage';
    const framing = fc.oneof(
      fc
        .uint8Array({ minLength: 1, maxLength: 300 })
        .map((b) => Buffer.concat([Buffer.from(b), Buffer.from('\r\n\r\n')])),
      fc.constantFrom(
        'GARBAGE\r\n\r\n',
        'GET /healthz HTTP/9.9\r\n\r\n',
        'GET /healthz\r\n\r\n',
        ' / HTTP/1.1\r\n\r\n',
        'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n',
        'GET /healthz HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n',
        'POST /messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n',
        'POST /messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!',
        'POST /messages HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
        'POST /messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n',
        'POST /messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n',
        `GET /healthz HTTP/1.1\r\nHost: x\r\n${'X-a: b\r\n'.repeat(5_000)}\r\n`,
        `GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
        'GET /healthz HTTP/1.1\nHost: x\n\n',
        'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n\u0000\u0000\u0000',
      ),
    );
    await readOnlyBatch(() =>
      check(name, framing, runs(300), async (bytes) => {
        const input: HttpInput = { method: '(raw)', target: String(bytes).slice(0, 80).replace(/\r\n/g, '⏎') };
        const response = await rawHttp(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes, 'latin1'), {
          timeoutMs: REQUEST_TIMEOUT_MS * 4,
        });
        judge(name, input, response, { success: [200], closed: true });
      }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// The WebSocket: hostile upgrades, oversized frames, floods.
// ---------------------------------------------------------------------------------------------

describe('/connect', () => {
  it('hostile upgrade requests: 101, or a refusal with the ASMTP body, never a 5xx', async () => {
    const name = 'WS /connect upgrade';
    const query = queryArb({
      name,
      path: () => '/connect',
      token: () => undefined,
      params: {
        after_created_at: () => ['0', String(Date.now()), '01', '-1'],
        after_envelope_id: () => [ZERO_ID, fixture.e2, 'x'],
        token: () => [fixture.alice, '', 'nope'],
      },
    });
    const wsHeaders = fc.record({
      key: fc.oneof(
        { arbitrary: fc.constant('dGhlIHNhbXBsZSBub25jZQ=='), weight: 3 },
        fc.constantFrom('', 'short', '!!!!!!!!!!!!!!!!!!!!!!==', 'x'.repeat(2_000)),
        fc.string({ maxLength: 30 }),
      ),
      version: fc.oneof({ arbitrary: fc.constant('13'), weight: 3 }, fc.constantFrom('8', '', '99', 'x', '13, 8')),
      upgrade: fc.oneof({ arbitrary: fc.constant('websocket'), weight: 3 }, fc.constantFrom('WebSocket', 'h2c', '')),
      bearer: fc.constantFrom<'alice' | 'none' | 'bad'>('alice', 'alice', 'none', 'bad'),
      path: fc.oneof(
        { arbitrary: fc.constant('/connect'), weight: 6 },
        fc.constantFrom(
          '/connect/',
          '/CONNECT',
          '/connect%00',
          '//connect',
          '/connect/..',
          '/./connect',
          '/connect#x',
          '/nope',
        ),
      ),
    });
    await readOnlyBatch(() =>
      check(name, fc.tuple(query, wsHeaders), runs(400), async ([q, h]) => {
        const headers: Array<[string, string]> = [
          ['Upgrade', h.upgrade],
          ['Connection', 'Upgrade'],
          ['Sec-WebSocket-Key', h.key],
          ['Sec-WebSocket-Version', h.version],
        ];
        const token = h.bearer === 'alice' ? fixture.alice : h.bearer === 'bad' ? 'bad-token' : undefined;
        const input: HttpInput = { method: 'GET', target: `${h.path}${q}`, token, headers };
        const response = await send(input);
        judge(name, input, response, { success: [101, 200], closed: false });
      }),
    );
  });

  type Frame = { kind: 'text' | 'binary' | 'ping' | 'pong' | 'fragments' | 'bad-utf8'; size: number; count: number };
  const frameArb: fc.Arbitrary<Frame> = fc.record({
    kind: fc.constantFrom('text', 'binary', 'ping', 'pong', 'fragments', 'bad-utf8'),
    size: fc.oneof(
      fc.integer({ min: 0, max: MAX_CLIENT_FRAME }),
      fc.integer({ min: MAX_CLIENT_FRAME + 1, max: 4 * MAX_CLIENT_FRAME }),
      fc.integer({ min: 0, max: 125 }),
    ),
    count: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 100, max: 1_000 })),
  });

  function sendFrames(ws: WebSocket, frame: Frame): void {
    for (let i = 0; i < frame.count && ws.readyState === WebSocket.OPEN; i++) {
      const bytes = randomBytes(frame.size);
      switch (frame.kind) {
        case 'text':
          ws.send('x'.repeat(frame.size));
          break;
        case 'binary':
          ws.send(bytes);
          break;
        case 'ping':
          if (frame.size <= 125) ws.ping(bytes);
          break;
        case 'pong':
          if (frame.size <= 125) ws.pong(bytes);
          break;
        case 'fragments':
          ws.send(bytes.subarray(0, frame.size >> 1), { fin: false, binary: true });
          ws.send(bytes.subarray(frame.size >> 1), { fin: true, binary: true });
          break;
        case 'bad-utf8':
          ws.send(Buffer.from([0xff, 0xfe, ...bytes.subarray(0, Math.min(frame.size, 100))]), { binary: false });
          break;
      }
    }
  }

  it('frames and floods from the client: ignored, except that an oversized or malformed frame closes the socket; pushes still arrive', async () => {
    const name = 'WS /connect frames';
    const before = await digests(db);
    let sentEnvelopes = 0;
    await check(name, fc.array(frameArb, { minLength: 1, maxLength: 4 }), runs(80), async (frames) => {
      const socket = await connect(op.url, { token: fixture.carol });
      try {
        for (const frame of frames) sendFrames(socket.ws, frame);
        // The server is never expected to answer client frames; give it time to act on them.
        await new Promise<void>((resolve) => socket.ws.send('', () => resolve()));
        await sleep(50);
        const oversized = frames.some(
          (f) => (f.kind === 'text' || f.kind === 'binary' || f.kind === 'fragments') && f.size > MAX_CLIENT_FRAME,
        );
        const malformed = frames.some((f) => f.kind === 'bad-utf8');
        if (oversized || malformed) {
          await socket.untilClosed(5_000);
          tally(name, 'closed');
          // 1009 message too big, 1007 invalid payload; an earlier malformed frame may win.
          if (![1009, 1007, 1006].includes(socket.closeCode!))
            throw new Error(`closed with ${socket.closeCode} for ${JSON.stringify(frames)}`);
        } else {
          const probe = envelope('@hx.carol', { subject: 'probe' });
          const accepted = await op.client.post('/messages', probe, fixture.alice);
          expect(accepted.status).toBe(202);
          sentEnvelopes++;
          await socket.until(() => socket.ids.includes(probe.id as string), 5_000, 'a push after the flood');
          if (socket.closeCode !== undefined)
            throw new Error(`socket closed (${socket.closeCode}) by ${JSON.stringify(frames)}`);
          tally(name, 101);
        }
      } finally {
        socket.close();
      }
    });
    await expectHealthy();
    // Only the probes were written.
    const changed = changes(before, await digests(db));
    expect(changed.envelopes ?? 0).toBe(sentEnvelopes);
    expect(Object.keys(changed).every((t) => ['envelopes', 'mailbox_entries', 'mailboxes'].includes(t))).toBe(true);
  });

  it('raw bytes after the upgrade (not WebSocket framing): closed or ignored, the process stays healthy', async () => {
    const name = 'WS /connect raw bytes';
    await readOnlyBatch(() =>
      check(
        name,
        fc.tuple(fc.boolean(), fc.uint8Array({ minLength: 1, maxLength: 2_000 })),
        runs(40),
        async ([reserved, bytes]) => {
          const socket = await new Promise<Socket>((resolve, reject) => {
            const s = tcp(port, '127.0.0.1');
            let head = '';
            s.on('error', reject);
            s.on('data', (chunk) => {
              head += chunk.toString('latin1');
              if (head.includes('\r\n\r\n')) {
                s.removeAllListeners('data');
                if (!head.startsWith('HTTP/1.1 101')) reject(new Error(`upgrade refused: ${head}`));
                else resolve(s);
              }
            });
            s.write(
              `GET /connect HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n` +
                `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${fixture.carol}\r\n\r\n`,
            );
          });
          const closed = new Promise<boolean>((resolve) => {
            socket.on('error', () => undefined);
            socket.on('close', () => resolve(true));
            setTimeout(() => resolve(false), reserved ? 2_000 : 300);
          });
          // A frame with a reserved opcode is a protocol error that must close the socket; random
          // bytes may also look like the start of a long frame, which the server just waits for.
          socket.write(Buffer.concat([Buffer.from(reserved ? [0x8f, 0x80, 0, 0, 0, 0] : []), Buffer.from(bytes)]));
          const wasClosed = await closed;
          socket.destroy();
          tally(name, wasClosed ? 'closed' : 101);
          if (reserved && !wasClosed) throw new Error('a socket sending a reserved opcode stayed open');
        },
      ),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Slow clients (ROOST_HTTP_REQUEST_TIMEOUT_MS = 2000).
// ---------------------------------------------------------------------------------------------

describe('slow clients', () => {
  /** Open a socket, write `head` at once, then `tail` one byte every `everyMs`; report the outcome. */
  function dribble(head: string, tail: string, everyMs: number): Promise<{ ms: number; response: string }> {
    return new Promise((resolve) => {
      const started = Date.now();
      const socket = tcp(port, '127.0.0.1');
      let response = '';
      let i = 0;
      socket.write(head);
      const timer = setInterval(() => {
        if (i < tail.length && !socket.destroyed) socket.write(tail[i++]);
      }, everyMs);
      socket.on('data', (chunk) => (response += chunk.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ ms: Date.now() - started, response });
      });
    });
  }

  /** A 408 with the ASMTP error body, or a close without an answer. */
  function expectCutOff(outcome: { ms: number; response: string }, what: string): void {
    expect({ what, cutWithin: outcome.ms < REQUEST_TIMEOUT_MS + 2_500 }).toEqual({ what, cutWithin: true });
    if (outcome.response === '') return;
    expect(outcome.response).toMatch(/^HTTP\/1\.1 408 /);
    const body = JSON.parse(outcome.response.slice(outcome.response.indexOf('\r\n\r\n') + 4));
    expect(body).toEqual({ error: { code: 'BAD_REQUEST', message: expect.any(String) } });
  }

  it('headers dribbled, a body dribbled, a stalled request line, many at once: each cut off near the timeout; others are served meanwhile', async () => {
    const name = 'slow clients';
    // A WebSocket is not a slow request: it must outlive the HTTP request timeout.
    const socket = await connect(op.url, { token: fixture.carol });
    const before = await digests(db);
    const body = JSON.stringify(envelope('@hx.bob')).padEnd(400, ' ');
    const slow = [
      ...Array.from({ length: 20 }, () =>
        dribble('GET /healthz HTTP/1.1\r\nHost: x\r\n', `X-Slow: ${'a'.repeat(100)}\r\n\r\n`, 100).then(
          (o) => ['headers', o] as const,
        ),
      ),
      ...Array.from({ length: 20 }, () =>
        dribble(
          `POST /messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fixture.alice}\r\nContent-Length: ${body.length}\r\n\r\n`,
          body,
          50,
        ).then((o) => ['body', o] as const),
      ),
      ...Array.from({ length: 10 }, () => dribble('GET /healthz HTT', '', 1_000).then((o) => ['stalled', o] as const)),
    ];
    // While 50 slow sockets are held open, ordinary requests are answered promptly.
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      await expectHealthy();
      expect(Date.now() - started).toBeLessThan(1_000);
      await sleep(100);
    }
    for (const [kind, outcome] of await Promise.all(slow)) {
      tally(name, outcome.response === '' ? 'closed' : Number(outcome.response.slice(9, 12)));
      expectCutOff(outcome, kind);
    }
    await expectHealthy();
    expect(changes(before, await digests(db))).toEqual({});
    try {
      await sleep(REQUEST_TIMEOUT_MS);
      const probe = envelope('@hx.carol', { subject: 'still there' });
      expect((await op.client.post('/messages', probe, fixture.alice)).status).toBe(202);
      await socket.until(() => socket.ids.includes(probe.id as string), 5_000, 'a push on a long-lived socket');
      expect(socket.closeCode).toBeUndefined();
    } finally {
      socket.close();
    }
  });
});
