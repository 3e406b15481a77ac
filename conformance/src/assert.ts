import { inspect } from 'node:util';
import type { Reply } from './http';

/** A check that did not hold: the test FAILs with this message. */
export class Failure extends Error {}

/** The target lacks what the test needs: the test is SKIPped with this reason. */
export class Skip extends Error {}

export const show = (value: unknown, max = 300): string => {
  const text = typeof value === 'string' ? JSON.stringify(value) : inspect(value, { depth: 6, breakLength: Infinity });
  return text.length > max ? `${text.slice(0, max)}…` : text;
};

const where = (what: string) => (what ? `${what}: ` : '');

export function ok(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Failure(message);
}

/** Structural equality: object key order ignored, array order significant. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, i) => deepEqual(item, other[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((key) => Object.prototype.hasOwnProperty.call(b, key) && deepEqual((a as any)[key], (b as any)[key]));
}

export function eq(actual: unknown, expected: unknown, what = ''): void {
  if (!deepEqual(actual, expected)) throw new Failure(`${where(what)}expected ${show(expected)}, got ${show(actual)}`);
}

export function notEq(actual: unknown, unexpected: unknown, what = ''): void {
  if (deepEqual(actual, unexpected)) throw new Failure(`${where(what)}expected anything but ${show(unexpected)}`);
}

export function isInt(value: unknown, what: string): asserts value is number {
  if (!Number.isInteger(value)) throw new Failure(`${what}: expected an integer, got ${show(value)}`);
}

export function hasNoKey(object: unknown, key: string, what = ''): void {
  if (object !== null && typeof object === 'object' && Object.prototype.hasOwnProperty.call(object, key)) {
    throw new Failure(`${where(what)}unexpected key "${key}" in ${show(object)}`);
  }
}

export function hasKey(object: unknown, key: string, what = ''): void {
  if (object === null || typeof object !== 'object' || !Object.prototype.hasOwnProperty.call(object, key)) {
    throw new Failure(`${where(what)}missing key "${key}" in ${show(object)}`);
  }
}

export function expectStatus(reply: Reply, status: number | number[], what = ''): void {
  const wanted = Array.isArray(status) ? status : [status];
  if (!wanted.includes(reply.status)) {
    throw new Failure(
      `${where(what)}${reply.method} ${reply.path} → expected ${wanted.join('|')}, got ${reply.status} ${show(reply.text, 200)}`,
    );
  }
}

/** A JSON error `{"error":{"code","message"}}` with this status and code. */
export function expectError(reply: Reply, status: number, code: string, what = ''): void {
  const got = reply.body?.error?.code;
  if (reply.status !== status || got !== code) {
    throw new Failure(
      `${where(what)}${reply.method} ${reply.path} → expected ${status} ${code}, got ${reply.status} ${show(reply.text, 200)}`,
    );
  }
}

/** `keys` appear in `object` in this relative order (other keys may sit between them). */
export function keyOrder(object: Record<string, unknown>, reference: readonly string[], what = ''): void {
  const present = Object.keys(object).filter((key) => reference.includes(key));
  const expected = reference.filter((key) => Object.prototype.hasOwnProperty.call(object, key));
  if (!deepEqual(present, expected)) {
    throw new Failure(
      `${where(what)}key order ${present.join(',')} differs from the reference order ${expected.join(',')}`,
    );
  }
}

/** What a failed `fetch` says: its cause (the socket error) when it has one, else its message. */
export function causeText(error: unknown): string {
  const { cause, message } = error as Error;
  return cause instanceof Error ? cause.message : typeof cause === 'string' ? cause : message;
}
