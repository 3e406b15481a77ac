/**
 * Array parameters of the accept statements (`unnest($n::text[])`, `$n::bigint[]`). On Postgres
 * `pg` sends them in the binary array format (`toPostgres` returns a Buffer, which `pg` binds as
 * a binary parameter): no array literal is built, no element is escaped (two regex passes over
 * every ~1 KB body and header) and Postgres copies the elements instead of parsing the literal.
 * The bytes of each element are the same UTF-8 `pg` sends for a text parameter. PGlite gets the
 * plain values (`pgliteValue`), serialized by its own array serializer as before.
 */
export class ArrayParam<T extends string | number | null> {
  constructor(
    readonly values: readonly T[],
    private readonly encode: (values: readonly T[]) => Buffer,
  ) {}

  /** Called by `pg` (utils.prepareValue): a Buffer is bound in the binary format. */
  toPostgres(): Buffer {
    return this.encode(this.values);
  }
}

const TEXT_OID = 25;
const INT8_OID = 20;
const TWO_32 = 0x1_0000_0000;

/**
 * The header of array_send's format for one dimension: ndim, has-nulls flag, element type, then
 * the dimension's length and lower bound (omitted for an empty array, ndim 0).
 */
function writeHeader(buffer: Buffer, length: number, hasNull: boolean, oid: number): number {
  buffer.writeInt32BE(length === 0 ? 0 : 1, 0);
  buffer.writeInt32BE(hasNull ? 1 : 0, 4);
  buffer.writeInt32BE(oid, 8);
  if (length === 0) return 12;
  buffer.writeInt32BE(length, 12);
  buffer.writeInt32BE(1, 16);
  return 20;
}

/** Strings up to this long are measured and copied in JS (a native call each costs more). */
const SHORT = 64;

/** Big-endian 32-bit `value` at `offset` (what `writeInt32BE` does, without its checks). */
function put32(buffer: Buffer, offset: number, value: number): void {
  buffer[offset] = value >>> 24;
  buffer[offset + 1] = value >>> 16;
  buffer[offset + 2] = value >>> 8;
  buffer[offset + 3] = value;
}

/** UTF-8 length of `value`: a short ASCII string's is its length. */
function utf8Length(value: string): number {
  if (value.length > SHORT) return Buffer.byteLength(value, 'utf8');
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 0x7f) return Buffer.byteLength(value, 'utf8');
  return value.length;
}

/**
 * The elements are often the same value over and over (an entry row per recipient repeats its
 * envelope's id, and `kind`): a value equal to the one before is copied from the bytes already
 * written, a short ASCII one written byte by byte, only others encoded by `Buffer.write`.
 */
export function encodeTextArray(values: readonly (string | null)[]): Buffer {
  let size = values.length === 0 ? 12 : 20;
  let hasNull = false;
  let previous: string | null = null;
  let previousBytes = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    size += 4;
    if (value === null) {
      hasNull = true;
      continue;
    }
    if (value !== previous) {
      previous = value;
      previousBytes = utf8Length(value);
    }
    size += previousBytes;
  }
  const buffer = Buffer.allocUnsafe(size);
  let offset = writeHeader(buffer, values.length, hasNull, TEXT_OID);
  previous = null;
  let previousAt = 0;
  let previousLength = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null) {
      put32(buffer, offset, -1);
      offset += 4;
      continue;
    }
    const at = offset + 4;
    let written: number;
    if (value === previous) {
      written = previousLength;
      if (written <= 8) for (let k = 0; k < written; k++) buffer[at + k] = buffer[previousAt + k];
      else buffer.copyWithin(at, previousAt, previousAt + written);
    } else if (value.length <= SHORT && utf8Length(value) === value.length) {
      written = value.length;
      for (let k = 0; k < written; k++) buffer[at + k] = value.charCodeAt(k);
    } else {
      written = buffer.write(value, at, 'utf8');
    }
    put32(buffer, offset, written);
    previous = value;
    previousAt = at;
    previousLength = written;
    offset = at + written;
  }
  return offset === size ? buffer : buffer.subarray(0, offset);
}

export function encodeBigintArray(values: readonly (number | null)[]): Buffer {
  const hasNull = values.includes(null);
  // 12 bytes per element (length + int8), 4 for a null.
  const buffer = Buffer.allocUnsafe((values.length === 0 ? 12 : 20) + values.length * 12);
  let offset = writeHeader(buffer, values.length, hasNull, INT8_OID);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null) {
      put32(buffer, offset, -1);
      offset += 4;
      continue;
    }
    if (!Number.isSafeInteger(value)) throw new RangeError(`not a bigint parameter: ${value}`);
    put32(buffer, offset, 8);
    // Two's complement halves: floor keeps the high word right for negative values.
    const high = Math.floor(value / TWO_32);
    put32(buffer, offset + 4, high);
    put32(buffer, offset + 8, value - high * TWO_32);
    offset += 12;
  }
  return buffer.subarray(0, offset);
}

/** A `text[]` parameter (elements may be null). */
export const textArray = (values: readonly (string | null)[]) => new ArrayParam(values, encodeTextArray);

/** A `bigint[]` parameter of safe integers (elements may be null). */
export const bigintArray = (values: readonly (number | null)[]) => new ArrayParam(values, encodeBigintArray);

/** What PGlite binds for a parameter: the plain values of an ArrayParam, anything else as is. */
export const pgliteValue = (param: unknown): unknown => (param instanceof ArrayParam ? param.values : param);
