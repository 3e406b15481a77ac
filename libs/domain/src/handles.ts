/** Handle and allowlist grammar (ASMTP.md §1.1). */
export const HANDLE_PATTERN = '^@[a-z0-9_-]+\\.[a-z0-9_-]+$';
export const ALLOWLIST_ENTRY_PATTERN = '^@[a-z0-9_-]+\\.([a-z0-9_-]+|\\*)$';
export const MONITOR_PATTERN = '^mon_[0-9A-Za-z_-]{1,64}$';
export const ORG_NAME_PATTERN = '^[a-z0-9_-]+$';

const HANDLE_RE = new RegExp(HANDLE_PATTERN);
const ALLOWLIST_ENTRY_RE = new RegExp(ALLOWLIST_ENTRY_PATTERN);
const MONITOR_RE = new RegExp(MONITOR_PATTERN);
const ORG_NAME_RE = new RegExp(ORG_NAME_PATTERN);

export const isHandle = (value: unknown): value is string => typeof value === 'string' && HANDLE_RE.test(value);

export const isAllowlistEntry = (value: unknown): value is string =>
  typeof value === 'string' && ALLOWLIST_ENTRY_RE.test(value);

export const isMonitorHandle = (value: unknown): value is string => typeof value === 'string' && MONITOR_RE.test(value);

export const isOrgName = (value: unknown): value is string => typeof value === 'string' && ORG_NAME_RE.test(value);

/** `@acme.bot` → `acme`. */
export function ownerOf(handle: string): string {
  return handle.slice(1, handle.indexOf('.'));
}

/** `@acme.bot` → `bot`. */
export function localNameOf(handle: string): string {
  return handle.slice(handle.indexOf('.') + 1);
}

/** `@acme.bot` → `@acme.*`. */
export function ownerGlobOf(handle: string): string {
  return `@${ownerOf(handle)}.*`;
}

/** True when an allowlist names `handle` exactly or through its owner glob. */
export function allowlistCovers(allowlist: readonly string[], handle: string): boolean {
  const glob = ownerGlobOf(handle);
  return allowlist.some((entry) => entry === handle || entry === glob);
}

export type InboundPolicy = 'allowlist' | 'open';

export interface PolicySubject {
  handle: string;
  policy: InboundPolicy;
  allowlist: readonly string[];
}

/** `admits(target, sender)` of ASMTP.md §1.5. */
export function admits(target: PolicySubject, sender: string): boolean {
  return target.policy === 'open' || allowlistCovers(target.allowlist, sender);
}

/**
 * May `sender` deliver to `recipient`? Both gates must open (§1.5); a self-send always passes
 * (§1.7); a recipient's block of the sender refuses (§1.6). The caller maps `false` onto the
 * non-enumerating 404.
 */
export function mayDeliver(sender: PolicySubject, recipient: PolicySubject, recipientBlocksSender: boolean): boolean {
  if (sender.handle === recipient.handle) return true;
  if (recipientBlocksSender) return false;
  return admits(recipient, sender.handle) && admits(sender, recipient.handle);
}

/** Discovery visibility (§1.8): one-directional, the caller's own allowlist is irrelevant. */
export function isVisibleTo(
  target: { handle: string; visibility: 'public' | 'private'; allowlist: readonly string[] },
  caller: string,
): boolean {
  return target.visibility === 'public' || target.handle === caller || allowlistCovers(target.allowlist, caller);
}
