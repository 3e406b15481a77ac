import DOMPurify from 'dompurify';
import { marked } from 'marked';

const SAFE_URL = /^(?:https?:|mailto:)/i;

// Links leave the console without a referrer and in a new tab; anything but http(s)/mailto is dropped.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    const target = node.getAttribute('href') ?? '';
    if (!SAFE_URL.test(target)) node.removeAttribute('href');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
    node.setAttribute('target', '_blank');
  }
});

/**
 * Markdown to HTML that is safe to insert: marked renders, DOMPurify keeps only inert markup (no
 * script, style, event handler, form, frame, or non-http(s) link). Images are dropped: they would
 * fetch from wherever the sender pointed (and the CSP refuses them anyway).
 */
export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false, gfm: true, breaks: false });
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'svg', 'math'],
    FORBID_ATTR: ['style', 'class', 'id'],
    ALLOWED_URI_REGEXP: SAFE_URL,
  });
}
