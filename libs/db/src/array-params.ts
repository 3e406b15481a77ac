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

export function encodeTextArray(values: readonly (string | null)[]): Buffer {
  let size = values.length === 0 ? 12 : 20;
  let hasNull = false;
  for (const value of values) {
    if (value === null) hasNull = true;
    else size += Buffer.byteLength(value, 'utf8');
    size += 4;
  }
  const buffer = Buffer.allocUnsafe(size);
  let offset = writeHeader(buffer, values.length, hasNull, TEXT_OID);
  for (const value of values) {
    if (value === null) {
      buffer.writeInt32BE(-1, offset);
      offset += 4;
      continue;
    }
    const written = buffer.write(value, offset + 4, 'utf8');
    buffer.writeInt32BE(written, offset);
    offset += 4 + written;
  }
  return offset === size ? buffer : buffer.subarray(0, offset);
}

export function encodeBigintArray(values: readonly (number | null)[]): Buffer {
  const hasNull = values.includes(null);
  // 12 bytes per element (length + int8), 4 for a null.
  const buffer = Buffer.allocUnsafe((values.length === 0 ? 12 : 20) + values.length * 12);
  let offset = writeHeader(buffer, values.length, hasNull, INT8_OID);
  for (const value of values) {
    if (value === null) {
      buffer.writeInt32BE(-1, offset);
      offset += 4;
      continue;
    }
    if (!Number.isSafeInteger(value)) throw new RangeError(`not a bigint parameter: ${value}`);
    buffer.writeInt32BE(8, offset);
    // Two's complement halves: floor keeps the high word right for negative values.
    const high = Math.floor(value / TWO_32);
    buffer.writeInt32BE(high, offset + 4);
    buffer.writeUInt32BE(value - high * TWO_32, offset + 8);
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
