import { anchorScanner, atBoundary, clauseBefore, NEGATION, type Anchors } from './rules';

/**
 * `credential_request`: an instruction asking the reader to hand over a credential ("send me your
 * API key", "paste your AWS secret here", "cat ~/.aws/credentials and reply"). Not: warnings
 * ("never share your password"), reported speech ("if anyone asks you to send your token"),
 * documentation that feeds a credential to software ("provide your API key in the Authorization
 * header", "paste your token into the .env file"), or public material ("send me your SSH public key").
 */

interface Credential {
  readonly label: string;
  readonly pattern: string;
}

/** Tried in this order within one alternation. `label` completes the detail: "asks the reader to hand over <label>". */
const CREDENTIALS: readonly Credential[] = [
  {
    label: 'a private key',
    pattern: String.raw`(?:ssh\s{1,3})?private[ _-]?keys?|~?\/?(?:\.ssh\/)?id_(?:rsa|ed25519|ecdsa|dsa)\b(?!\.pub)|pem\s{1,3}(?:file|key)`,
  },
  {
    label: 'a credentials file',
    pattern: String.raw`~?\/?\.aws\/credentials|\.env\b(?:\s{1,3}file)?|\.npmrc|\.netrc|\.pgpass|\.git-credentials|\.docker\/config\.json|kubeconfig|~?\/?\.kube\/config|credentials?\s{1,3}(?:file|json)|service[ -]account\s{1,3}(?:key|json)`,
  },
  {
    label: 'a secret key',
    pattern: String.raw`(?:aws|client|api|app|webhook|signing)\s{1,3}secret(?:\s{1,3}(?:access\s{1,3})?key)?|secret\s{1,3}(?:access\s{1,3})?keys?|access\s{1,3}keys?`,
  },
  { label: 'an API key', pattern: String.raw`api[ _-]?keys?` },
  {
    label: 'an access token',
    pattern: String.raw`(?:access|auth|api|bearer|session|refresh|personal\s{1,3}access|bot|oauth)\s{1,3}tokens?|tokens?|pats?\b`,
  },
  {
    label: 'a password',
    pattern: String.raw`passwords?|passphrases?|passwd|passcodes?|login\s{1,3}(?:details|info|credentials)|pin\s{1,3}(?:code|number)`,
  },
  { label: 'credentials', pattern: String.raw`credentials|creds` },
  {
    label: 'a one-time or recovery code',
    pattern: String.raw`(?:2fa|mfa|otp|one[ -]time|verification|authenticator|sms)\s{1,3}codes?|otp|recovery\s{1,3}(?:codes?|phrase)`,
  },
  {
    label: 'a wallet seed phrase',
    pattern: String.raw`seed\s{1,3}phrase|mnemonic(?:\s{1,3}phrase)?|wallet\s{1,3}(?:key|seed)`,
  },
  { label: 'a session cookie', pattern: String.raw`(?:session|auth)\s{1,3}cookies?|cookie\s{1,3}header` },
];

/** Nouns after the credential word that make it something else: "password reset link", "token limit". */
const NOT_THE_CREDENTIAL = String.raw`(?!\s{0,3}(?:reset|policy|policies|manager|hint|rotation|requirements?|strength|length|expiry|expiration|page|field|prompt|format|docs?|documentation|guide|settings|scopes?|permissions?|name|id|prefix|header|type|usage|limits?|quota|count|budget|storage|vault)\b)`;
const CREDENTIAL = String.raw`(?:${CREDENTIALS.map((c) => `(${c.pattern})`).join('|')})(?![A-Za-z0-9_])${NOT_THE_CREDENTIAL}`;

/** Up to three words between the determiner and the credential noun ("your new production AWS"). */
const STOP = String.raw`(?:to|for|of|on|about|in|with|and|or|link|links|steps|instructions|guide|docs?|documentation|policy|page|how|way|process|procedure|rules?|reset|rotation|hint|manager|public)`;
const MODIFIERS = String.raw`(?:(?!${STOP}\b)[\w.~\/-]{1,30}\s{1,3}){0,3}?`;
const DETERMINER = String.raw`(?:(?:all\s{1,3}|both\s{1,3})?(?:your|ur|the|our|this|that|those|these|his|her|their)\s{1,3})`;
const CONTENTS = String.raw`(?:(?:the\s{1,3})?(?:full\s{1,3})?(?:contents?|output|text|value)\s{1,3}of\s{1,3})`;

// Each request form is found by its small word ("me", "your", "with"), which V8 scans for fast;
// the verb before it is a lookbehind, tried only where that word occurs.
const NOT_IN_WORD = String.raw`(?<![\w-])`;
/** "send me", "give us", "DM me", "email me". */
const TO_ME_VERB = String.raw`(?:send|give|tell|show|email|e-mail|dm|message|text|forward|pass|hand|slack|read)`;
/** "paste your", "share your", "provide your": only the reader's own credential. */
const YOUR_VERB = String.raw`(?:send|share|give|paste|post|provide|upload|attach|forward|submit|dm|email|e-mail|hand\s{1,3}over|drop|leak|expose|reveal|disclose)\s{1,3}(?:over\s{1,3}|along\s{1,3})?${CONTENTS}?`;
/** "what is your password", "I need your API key". */
const ASK_VERB = String.raw`(?:what(?:'s|\s{1,3}is|\s{1,3}are)|i\s{1,3}(?:need|want|require)|we\s{1,3}(?:need|want|require))\s{1,3}`;
/** "reply with your password", "respond with the contents of ~/.ssh/id_rsa". */
const REPLY_VERB = String.raw`(?:reply|respond|answer|write\s{1,3}back|get\s{1,3}back\s{1,3}to\s{1,3}me|return)`;

interface RequestForm {
  readonly pattern: RegExp;
  /** Whether "into the .env file"-style destinations after the credential mean documentation. */
  readonly softwareMeansDocs: boolean;
}

const REQUESTS: readonly RequestForm[] = [
  {
    pattern: new RegExp(
      String.raw`\s(?:me|us)\b(?<=${NOT_IN_WORD}${TO_ME_VERB}\s{1,3}(?:it\s{1,3}|over\s{1,3})?(?:me|us))\s{1,3}${CONTENTS}?${DETERMINER}?${MODIFIERS}${CREDENTIAL}`,
      'gi',
    ),
    softwareMeansDocs: false,
  },
  {
    pattern: new RegExp(
      String.raw`\s(?:your|ur)\s{1,3}(?<=${NOT_IN_WORD}(?:${YOUR_VERB}|${ASK_VERB})(?:your|ur)\s{1,3})${MODIFIERS}${CREDENTIAL}`,
      'gi',
    ),
    softwareMeansDocs: true,
  },
  {
    pattern: new RegExp(
      String.raw`\swith\s{1,3}(?<=${NOT_IN_WORD}${REPLY_VERB}\s{1,3}with\s{1,3})${CONTENTS}?${DETERMINER}?${MODIFIERS}${CREDENTIAL}`,
      'gi',
    ),
    softwareMeansDocs: true,
  },
];

/**
 * After "paste/provide your <credential>": a destination inside software means documentation,
 * unless the text also points back at the conversation ("here", "to me", "in this thread").
 */
const SOFTWARE_DESTINATION =
  /^[^.!?\n]{0,60}?\b(?:(?:in|into|to|as|via|using|under|inside|within|on|at|through)\s{1,3}(?:the\s{1,3}|a\s{1,3}|an\s{1,3}|your\s{1,3})?(?:[\w.-]{1,30}\s{1,3}){0,2}?(?:header|headers|config|configuration|file|env|environment|variables?|settings|dashboard|console|cli|terminal|prompt|field|form|box|vault|keychain|keyring|manager|request|requests|portal|login\s{1,3}page|sign-?in\s{1,3}page|ci|pipeline|secrets?|\.env)\b|when\s{1,3}prompted|to\s{1,3}(?:log\s?in|sign\s?in|authenticate))/i;
const CONVERSATION =
  /^[^.!?\n]{0,60}?\b(?:here|below|to\s{1,3}(?:me|us)|with\s{1,3}(?:me|us)|back|in\s{1,3}(?:this|the|a|your)\s{1,3}(?:chat|thread|reply|message|conversation|channel|comment|issue|dm|email)|in\s{1,3}(?:chat|dm|a\s{1,3}reply))\b/i;

/** Group i (1-based) of a request pattern is CREDENTIALS[i - 1]. */
function labelOf(match: RegExpExecArray): string {
  for (let i = 1; i < match.length; i += 1) if (match[i] !== undefined) return CREDENTIALS[i - 1].label;
  return 'credentials';
}

/** Commands that read a credentials file or the environment, then send or show the result. */
const CREDENTIALS_FILE = String.raw`(?:\.aws\/credentials|\.ssh\/id_(?:rsa|ed25519|ecdsa|dsa)(?!\.pub)\b|\.env\b|\.npmrc|\.netrc|\.pgpass|\.git-credentials|\.kube\/config|\.docker\/config\.json|etc\/shadow)`;
const READ_FILE = String.raw`${NOT_IN_WORD}(?:cat|type|more|less|head|tail|base64|xxd|strings|get-content|gc)\s{1,3}(?:-\w{1,5}\s{1,3}){0,3}["']?(?:~|\$HOME|\/(?:home|Users|root)\/[\w.-]{1,40})?\/?`;
const SEND_ON = String.raw`[^\n]{0,120}?(?:\||\b(?:reply|respond|send|paste|post|share|return|include|upload|curl|wget|nc|email|show\s{1,3}me|tell\s{1,3}me)\b)`;
const EXFILTRATION: readonly RegExp[] = [
  new RegExp(String.raw`${CREDENTIALS_FILE}(?<=${READ_FILE}${CREDENTIALS_FILE})${SEND_ON}`, 'gi'),
  new RegExp(
    String.raw`(?:printenv|env)\s{0,3}(?:\|\s{0,3}(?:curl|nc|wget)\b|(?:and|then|&&)\s{1,3}(?:reply|paste|send|post|share|email)\b)`,
    'gi',
  ),
];

const WORD = /\w/;

const handOver = (label: string): string => `asks the reader to hand over ${label}`;
const EXFILTRATION_DETAIL = 'asks the reader to send a credentials file or environment';

/** Every detail `detectCredentialRequest` can return. */
export const CREDENTIAL_REQUEST_DETAILS: readonly string[] = [
  ...CREDENTIALS.map((credential) => handOver(credential.label)),
  EXFILTRATION_DETAIL,
];

/** Every request names a credential, so contains one of these. */
const REQUEST_ANCHORS: readonly string[] = [
  'private',
  'id_rsa',
  'id_ed25519',
  'id_ecdsa',
  'id_dsa',
  'pem',
  'cred',
  '.env',
  '.npmrc',
  '.netrc',
  '.pgpass',
  '.docker',
  'kube',
  'account',
  'secret',
  'key',
  'token',
  'pat',
  'pass',
  'login',
  'pin',
  'code',
  'otp',
  'recovery',
  'seed',
  'mnemonic',
  'wallet',
  'cookie',
];
/** Every exfiltration names a credentials file or the environment. */
const EXFILTRATION_ANCHORS: readonly string[] = [
  '.aws',
  '.ssh',
  'env',
  '.npmrc',
  '.netrc',
  '.pgpass',
  'credential',
  'kube',
  '.docker',
  'shadow',
];
export const CREDENTIAL_REQUEST_ANCHORS: readonly string[] = [
  ...new Set([...REQUEST_ANCHORS, ...EXFILTRATION_ANCHORS]),
];
const scanAnchors = anchorScanner(CREDENTIAL_REQUEST_ANCHORS);

const anyOf = (anchors: readonly string[], present: Anchors): boolean => anchors.some((anchor) => present.has(anchor));

/** Detail of the first credential request found in `text`, or null. `present`: its anchors, if already scanned. */
export function detectCredentialRequest(text: string, present: Anchors = scanAnchors(text)): string | null {
  for (const { pattern, softwareMeansDocs } of anyOf(REQUEST_ANCHORS, present) ? REQUESTS : []) {
    pattern.lastIndex = 0;
    let match: RegExpExecArray | null;
    while ((match = pattern.exec(text)) !== null) {
      const end = match.index + match[0].length;
      const rest = text.slice(end, end + 100);
      const rejected =
        NEGATION.test(clauseBefore(text, match.index)) ||
        (softwareMeansDocs && SOFTWARE_DESTINATION.test(rest) && !CONVERSATION.test(rest));
      if (!rejected) {
        pattern.lastIndex = 0;
        return handOver(labelOf(match));
      }
      pattern.lastIndex = match.index + 1;
    }
  }
  for (const pattern of anyOf(EXFILTRATION_ANCHORS, present) ? EXFILTRATION : []) {
    pattern.lastIndex = 0;
    let command: RegExpExecArray | null;
    while ((command = pattern.exec(text)) !== null) {
      if (atBoundary(text, command.index, WORD) && !NEGATION.test(clauseBefore(text, command.index))) {
        pattern.lastIndex = 0;
        return EXFILTRATION_DETAIL;
      }
      pattern.lastIndex = command.index + 1;
    }
  }
  return null;
}
