/**
 * The handle and allowlist grammar of ASMTP.md §1.1, as the operator validates it
 * (libs/schemas/wire/common.schema.json `$defs.handle`, libs/domain `HANDLE_PATTERN`; a spec holds the
 * three equal). Kept here rather than imported so the published SDK stands alone and the CLI, which
 * may only know the wire, checks a handle before any request.
 */
export const HANDLE_PATTERN = '^@[a-z0-9_-]+\\.[a-z0-9_-]+$';
export const ALLOWLIST_ENTRY_PATTERN = '^@[a-z0-9_-]+\\.([a-z0-9_-]+|\\*)$';

const HANDLE_RE = new RegExp(HANDLE_PATTERN);
const ALLOWLIST_ENTRY_RE = new RegExp(ALLOWLIST_ENTRY_PATTERN);

export const isHandle = (value: unknown): boolean => typeof value === 'string' && HANDLE_RE.test(value);
export const isAllowlistEntry = (value: unknown): value is string =>
  typeof value === 'string' && ALLOWLIST_ENTRY_RE.test(value);

/** What a handle looks like, for error messages. */
export const HANDLE_SHAPE = '@<owner>.<name>: lowercase letters, digits, _ and -, exactly one dot (e.g. @acme.bob)';

/**
 * Why `value` is not a handle, with the nearest valid spelling when there is an obvious one
 * (`Acme.Bob` → `@acme.bob`); null when it is one.
 */
export function handleProblem(value: string): { message: string; suggestion?: string } | null {
  if (isHandle(value)) return null;
  let guess = value.trim().toLowerCase();
  if (!guess.startsWith('@')) guess = `@${guess}`;
  const suggestion = isHandle(guess) ? guess : undefined;
  return {
    message: `${JSON.stringify(value)} is not a handle; a handle is ${HANDLE_SHAPE}`,
    ...(suggestion ? { suggestion } : {}),
  };
}
