import { HANDLE_SHAPE, handleProblem, isAllowlistEntry } from '#client';
import { CliError, EXIT } from './output';

/**
 * Arguments checked before any request, with the operator's own grammar (libs/client/src/handles):
 * a mistyped handle is a usage error (exit 2) saying what a handle looks like, not a server regex.
 */
export function requireHandle(value: string, what = 'handle'): string {
  const problem = handleProblem(value);
  if (!problem) return value;
  const hint = problem.suggestion
    ? `did you mean ${problem.suggestion}?`
    : `e.g. @acme.${value.replace(/[^a-z0-9_-]/g, '').toLowerCase() || 'bob'}`;
  throw new CliError(`${what} ${problem.message}`, EXIT.USAGE, hint, 'INVALID_HANDLE');
}

export function requireHandles(values: readonly string[] | undefined, what: string): void {
  for (const value of values ?? []) requireHandle(value, what);
}

export function requireAllowlistEntry(value: string): string {
  if (isAllowlistEntry(value)) return value;
  throw new CliError(
    `${JSON.stringify(value)} is not an allowlist entry`,
    EXIT.USAGE,
    `an entry is a handle (${HANDLE_SHAPE}) or an owner glob like @acme.*`,
    'INVALID_ALLOWLIST_ENTRY',
  );
}

/** Positive integer option (`--limit`, `--count`), or a usage error naming the option. */
export function positiveInt(
  value: string | undefined,
  option: string,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1 || n > max) {
    throw new CliError(`${option} must be a whole number from 1 to ${max}`, EXIT.USAGE, undefined, 'BAD_OPTION');
  }
  return n;
}
