/** An http(s) URL for a link, or null: `javascript:` and friends are shown as text. */
export function safeHref(url: unknown): string | null {
  return typeof url === 'string' && /^https?:\/\//i.test(url) ? url : null;
}
