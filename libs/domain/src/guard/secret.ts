import {
  anchorScanner,
  anchorsOf,
  characterClasses,
  entropy,
  firstMatch,
  isPlaceholder,
  looksRandom,
  type Anchors,
  type Rule,
} from './rules';

/**
 * `secret`: credentials pasted into content. Provider tokens are matched by their documented
 * prefixes and lengths; free-floating blobs (hashes, UUIDs, ULIDs, base64 image data) are never
 * matched on their own, only a value assigned to a secret-named key with enough entropy is.
 * A match whose token reads as a placeholder (EXAMPLE, dummy, xxxx, <...>) is skipped.
 */

/** Group 1 of the match is the token itself. */
const tokenIsReal = (match: RegExpExecArray): boolean => !isPlaceholder(match[1] ?? match[0]);
const tokenIsRandom =
  (minLength: number) =>
  (match: RegExpExecArray): boolean =>
    looksRandom(match[1] ?? match[0], minLength);

/** Template holes and common stand-ins for a password inside a URL. */
const URL_PASSWORD_STANDIN =
  /^(?:pass(?:word|wd)?|pwd|pw|secret|token|user(?:name)?|admin|root|guest|test|\$\w*|%\w*|:\w+|\*+)$/i;

/** `Authorization: Basic` whose decoded `user:password` is a documentation stand-in. */
function basicIsStandIn(encoded: string): boolean {
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return false;
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  return password === user || URL_PASSWORD_STANDIN.test(password) || isPlaceholder(password);
}

function jwtHeaderHasAlg(match: RegExpExecArray): boolean {
  if (isPlaceholder(match[0])) return false;
  try {
    const header: unknown = JSON.parse(Buffer.from(match[1], 'base64url').toString('utf8'));
    return typeof header === 'object' && header !== null && !Array.isArray(header) && 'alg' in header;
  } catch {
    return false;
  }
}

/** Key names next to a secret word that describe something else: a hash, a path, a policy, a name. */
const NOT_A_SECRET_KEY =
  /(?:hash|digest|checksum|fingerprint|sha|md5|url|uri|path|file|dir|name|id|ids|ref|arn|length|len|policy|reset|hint|field|label|prompt|manager|rotation|expiry|expires?|expiration|ttl|version|type|format|env|var|enabled|required|set|store|source|provider|header|location|count|min|max)$/i;

/** Values that are code or configuration indirections, not literals. */
const INDIRECTION =
  /^(?:\$|%|&|@|env\b|process\.env|os\.environ|os\.getenv|getenv|secrets\.|vault:|ssm:|arn:|data:|https?:|file:|\/\/|~\/|\.{1,2}\/|(?:process|os|config|settings|secrets|self|this|vars|ctx|context|req|request|options|opts|props|params|cfg|app|env)\.|[A-Za-z_$][A-Za-z_$]*(?:\.[A-Za-z_$][A-Za-z_$]*)+$)|[()[\]{}]/i;

/** Qualifiers that make "token" a cursor or an LLM token count rather than a credential. */
const PAGING_OR_COUNTING =
  /(?:page|next|prev(?:ious)?|continuation|cursor|sync|max|min|num|total|input|output|prompt|completion|context|request|idempotency|resume|stop|eos|bos|pad|unk|mask|cls|sep|special)[_.-]?$/i;

const WORD = /[A-Za-z0-9]/;
const TOKEN_CHAR = /[A-Za-z0-9_-]/;
const KEY_CHAR = /[A-Za-z0-9_.-]/;

/**
 * The generic rule matches from the secret word on ("password", "token"); the rest of the key name
 * before it ("DB_", "client_", "db") is read back here, so the regex can start with a literal.
 */
function assignedSecret(match: RegExpExecArray, text: string): boolean {
  const word = match[1];
  const value = match[3];
  let start = match.index;
  while (start > 0 && match.index - start < 75 && KEY_CHAR.test(text[start - 1])) start -= 1;
  const prefix = text.slice(start, match.index);
  if (prefix !== '') {
    // The secret word must begin a segment of the key: DB_PASSWORD, client-secret, dbPassword.
    const last = prefix[prefix.length - 1];
    const camel = /[a-z0-9]/.test(last) && /[A-Z]/.test(word[0]);
    if (!/[_.-]/.test(last) && !camel) return false;
    // A bare "token" after these qualifiers is a cursor or a count: next_page_token, max_tokens.
    if (/^tokens?$/i.test(word) && PAGING_OR_COUNTING.test(prefix)) return false;
  }
  if (NOT_A_SECRET_KEY.test(`${prefix}${word}${match[2] ?? ''}`)) return false;
  if (INDIRECTION.test(value) || isPlaceholder(value)) return false;
  // An absolute path with several segments is a file location, not a secret.
  if (/^\/[\w.-]+(?:\/[\w.-]+)+$/.test(value)) return false;
  const classes = characterClasses(value);
  const strong = classes >= 3 || (classes === 2 && value.length >= 16 && /\d/.test(value));
  return strong && entropy(value) >= 3;
}

/** `scheme://user:password@host`: the regex starts at "://"; the scheme is checked here. */
function urlHasPassword(match: RegExpExecArray, text: string): boolean {
  const [, user, password] = match;
  if (!/[A-Za-z][A-Za-z0-9+.-]{1,20}$/.test(text.slice(Math.max(0, match.index - 21), match.index))) return false;
  // `postgres:postgres@` style defaults and template holes are not leaked secrets.
  return password !== user && !URL_PASSWORD_STANDIN.test(password) && !isPlaceholder(password);
}

// Where a token's body can contain its own prefix (JWTs, sk-...), the boundary is a lookbehind placed
// right after the prefix instead of `notAfter`: a run like "eyJeyJeyJ..." is then tried once, from
// its start, rather than rescanned from every prefix in it.
const SECRET_RULES: readonly Rule[] = [
  {
    detail: 'private key (PEM block)',
    anchors: ['-----begin'],
    pattern:
      /-----BEGIN (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----(?:\r?\n[A-Za-z-]{1,40}: [^\r\n]{0,200}){0,4}\s{1,8}([A-Za-z0-9+/=]{40,})/g,
    // Real key bodies contain long runs (OpenSSH: AAAAAAAA), so only the words mark an example.
    accept: (match) => !/example|dummy|placeholder|fake|redacted/i.test(match[1]),
  },
  {
    detail: 'AWS access key id',
    anchors: ['akia', 'asia'],
    pattern: /(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/g,
    notAfter: WORD,
    accept: tokenIsReal,
  },
  {
    detail: 'AWS secret access key',
    anchors: ['secret'],
    pattern:
      /(?:aws[ _-]?secret(?:[ _-]?access)?(?:[ _-]?key)?|secret[ _-]?access[ _-]?key)["']?\s{0,3}(?:[:=]|=>|is)\s{0,3}["']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/gi,
    accept: tokenIsRandom(40),
  },
  {
    detail: 'GitHub token',
    anchors: ['ghp_', 'gho_', 'ghs_', 'ghu_', 'ghr_'],
    pattern: /gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9_])/g,
    notAfter: TOKEN_CHAR,
    accept: tokenIsReal,
  },
  {
    detail: 'GitHub fine-grained personal access token',
    anchors: ['github_pat_'],
    pattern: /github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{40,244}(?![A-Za-z0-9_])/g,
    accept: tokenIsReal,
  },
  {
    detail: 'GitLab personal access token',
    anchors: ['glpat-'],
    pattern: /glpat-(?<![A-Za-z0-9_-]glpat-)([A-Za-z0-9_-]{20,64})(?![A-Za-z0-9_-])/g,
    accept: tokenIsRandom(20),
  },
  {
    detail: 'Slack token',
    anchors: ['xox'],
    pattern: /xox[abposr]-(?<![A-Za-z0-9_-]xox[abposr]-)((?:\d{1,20}-){0,4}[A-Za-z0-9-]{10,200})(?![A-Za-z0-9_-])/g,
    accept: tokenIsRandom(16),
  },
  {
    detail: 'Slack webhook URL',
    anchors: ['hooks.slack.com'],
    pattern: /hooks\.slack\.com\/services\/(T[A-Z0-9]{6,12}\/B[A-Z0-9]{6,12}\/[A-Za-z0-9]{20,32})/g,
    accept: tokenIsReal,
  },
  {
    detail: 'Discord webhook URL',
    anchors: ['discord'],
    pattern: /discord(?:app)?\.com\/api\/webhooks\/(\d{15,20}\/[A-Za-z0-9_-]{60,70})/g,
    accept: tokenIsReal,
  },
  {
    detail: 'Stripe live key',
    anchors: ['_live_'],
    pattern: /(?:sk|rk)_live_[A-Za-z0-9]{20,247}(?![A-Za-z0-9_])/g,
    notAfter: TOKEN_CHAR,
    accept: tokenIsReal,
  },
  {
    detail: 'Google API key',
    anchors: ['aiza'],
    pattern: /AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/g,
    notAfter: TOKEN_CHAR,
    accept: tokenIsReal,
  },
  {
    detail: 'Anthropic API key',
    anchors: ['sk-ant-'],
    pattern: /sk-(?<![A-Za-z0-9_-]sk-)ant-(?:api|admin)\d{2}-([A-Za-z0-9_-]{80,120})(?![A-Za-z0-9_-])/g,
    accept: tokenIsRandom(80),
  },
  {
    detail: 'OpenAI-style API key (sk-...)',
    anchors: ['sk-'],
    pattern: /sk-(?<![A-Za-z0-9_-]sk-)(?:(?:proj|svcacct|admin)-)?([A-Za-z0-9_-]{32,200})(?![A-Za-z0-9_-])/g,
    accept: tokenIsRandom(32),
  },
  {
    detail: 'Google OAuth access token',
    anchors: ['ya29.'],
    pattern: /ya29\.([A-Za-z0-9_-]{30,2048})(?![A-Za-z0-9_-])/g,
    notAfter: /[A-Za-z0-9_.-]/,
    accept: tokenIsRandom(30),
  },
  {
    detail: 'npm access token',
    anchors: ['npm_'],
    pattern: /npm_([A-Za-z0-9]{36})(?![A-Za-z0-9_])/g,
    notAfter: TOKEN_CHAR,
    accept: tokenIsRandom(36),
  },
  {
    detail: 'Hugging Face token',
    anchors: ['hf_'],
    pattern: /hf_([A-Za-z0-9]{34,40})(?![A-Za-z0-9_])/g,
    notAfter: TOKEN_CHAR,
    accept: tokenIsRandom(34),
  },
  {
    detail: 'SendGrid API key',
    anchors: ['sg.'],
    pattern: /SG\.([A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])/g,
    notAfter: /[A-Za-z0-9_.-]/,
    accept: tokenIsReal,
  },
  {
    detail: 'password in URL',
    anchors: ['://'],
    pattern: /:\/\/([^\s:/@?#]{0,128}):([^\s/@]{1,256})@[A-Za-z0-9[]/g,
    accept: urlHasPassword,
  },
  {
    detail: 'JSON Web Token',
    anchors: ['eyj'],
    pattern:
      /(eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,2048})\.([A-Za-z0-9_-]{2,8192})\.([A-Za-z0-9_-]{16,2048})(?![A-Za-z0-9_-])/g,
    accept: jwtHeaderHasAlg,
  },
  {
    detail: 'credential in Authorization header',
    anchors: ['authorization'],
    pattern: /authorization["']?\s{0,3}[:=]\s{0,3}["']?(?:bearer|basic|token)\s{1,3}([A-Za-z0-9._~+/=-]{16,4096})/gi,
    accept: (match) => tokenIsRandom(16)(match) && !(/basic/i.test(match[0]) && basicIsStandIn(match[1])),
  },
  {
    detail: 'hard-coded password or secret',
    anchors: ['pass', 'pwd', 'secret', 'key', 'token', 'credential'],
    // Group 1 is the secret word, group 2 the rest of the key name, group 3 the value.
    pattern:
      /(password|passwd|passphrase|pwd|secret|(?:api|access|private|signing|encryption|master)[_-]?key|apikey|(?:auth|access|refresh|bearer|api|bot|session)[_-]?token|tokens?|credentials?)((?:[_-][A-Za-z0-9]{1,24}){0,3})["']?(?:\s{0,3}(?::=|=>|[:=])|\s{1,3}is:?)\s{0,3}["'`]?([^\s"'`,;<>]{8,200})/gi,
    accept: assignedSecret,
  },
];

/** Every detail `detectSecret` can return, in the order its rules are tried. */
export const SECRET_DETAILS: readonly string[] = SECRET_RULES.map((rule) => rule.detail);

export const SECRET_ANCHORS: readonly string[] = anchorsOf(SECRET_RULES);
const scanAnchors = anchorScanner(SECRET_ANCHORS);

/** Detail of the first kind of secret found in `text`, or null. `present`: its anchors, if already scanned. */
export function detectSecret(text: string, present: Anchors = scanAnchors(text)): string | null {
  return firstMatch(SECRET_RULES, text, present);
}
