import { anchorScanner, atBoundary, clauseBefore, NEGATION, type Anchors } from './rules';

/**
 * `production`: a risky action (deploy, migrate, restart, rollback, scale, delete, change, shell
 * access) aimed at production. Two things must meet in one sentence, within WINDOW characters:
 * an environment marker (`--context prod`, `NODE_ENV=production`, `prod-db`, "to production",
 * "the live site") and an action verb in its base or -ing form. "production" alone is prose
 * ("the production of this report"), and past tense ("we deployed to production") is a report,
 * not an action, so neither counts.
 */

/**
 * A marker is found by its environment word first (a literal, so V8 scans for it fast); each form
 * then checks the text before the word with a lookbehind and the text after it with a lookahead.
 * A marker's position is its environment word.
 */
const ENV = String.raw`(?:production|prod|live)`;
const PROD = String.raw`(?:production|prod)`;
const NOT_NON_OR_PRE = String.raw`(?<!(?:non|pre)[-_ ]?)`;

const MARKER_FORMS: readonly string[] = [
  // Flags and command arguments: --context prod, -n production, --env=live, -a app-prod.
  String.raw`(?<=(?<![\w-])-{1,2}(?:context|kube-context|ctx|env|environment|stage|profile|namespace|cluster|target|project|workspace|app|tier|inventory|limit|e|n|a|s|i)(?:=|\s{1,3})["']?(?:[\w./:@-]{0,60}[-_./:@])?${ENV})(?![A-Za-z])`,
  String.raw`(?<=(?<![\w-])--${PROD})(?![\w-])`,
  String.raw`(?<=(?<![\w-])(?:use-context|set-context|workspace\s{1,3}(?:select|new))\s{1,3}(?:[\w./:@-]{0,60}[-_./:@])?${ENV})(?![A-Za-z])`,
  // Environment variables and YAML/JSON keys: NODE_ENV=production, environment: prod.
  String.raw`(?<=(?<![\w-])(?:[A-Za-z][A-Za-z0-9]{0,20}_)?(?:env|environment|stage|tier|target|context|namespace|workspace|cluster)["']?\s{0,3}[:=]\s{0,3}["']?${ENV})(?![A-Za-z])`,
  // Host and resource names: prod-db, prod.tfvars, db.prod.internal, app-prod, envs/production.
  String.raw`(?<=(?<![A-Za-z0-9])(?<!(?:non|pre)[-_]?)${PROD})\d{0,3}[-_.](?!(?:ready|grade|quality|like|worthy|level)\b)[A-Za-z0-9]`,
  String.raw`(?<=[A-Za-z0-9](?<!(?:^|[^A-Za-z])(?:non|pre))[-_./]${PROD})(?![A-Za-z0-9])`,
  // Prepositional phrases: "to production", "on prod", "against the production".
  String.raw`(?<=\b(?:to|on|in|into|onto|against|from|at)\s{1,3}(?:the\s{1,3})?${PROD})\b(?![-_.][A-Za-z0-9])(?!\s{1,3}of\b)`,
  String.raw`(?<=\b(?:to|on|onto|against)\s{1,3}(?:the\s{1,3})?live)\b(?=\s{0,3}(?:[.,;:!?)\n]|$)|\s{1,3}(?:now|today|tonight|asap|env|environment|servers?|site|cluster|db|database)\b)`,
  // Adjectives on infrastructure nouns: "the production database", "live traffic", "prod cluster".
  String.raw`(?<=${NOT_NON_OR_PRE}\b${ENV})\s{1,3}(?:env|environment|clusters?|servers?|databases?|dbs?|stack|site|system|instances?|namespace|workspace|box|hosts?|nodes?|api|app|traffic|data|replicas?|primary|buckets?|k8s|kubernetes|infra|infrastructure|pods?|services?|containers?|deployment|config|tables?|users|accounts?|queues?|redis|postgres|mysql|vms?)\b`,
  // The bare word "prod" is always the environment.
  String.raw`(?<=${NOT_NON_OR_PRE}\bprod)\b(?![-_.][A-Za-z0-9])`,
];

const MARKER = new RegExp(String.raw`${ENV}(?:${MARKER_FORMS.join('|')})`, 'gi');

interface Action {
  readonly detail: string;
  readonly pattern: RegExp;
}

/**
 * In the order they are tried: the first category with a verb in reach names the finding. Each
 * pattern starts with a literal; the word boundary before it is checked in code.
 */
const ACTIONS: readonly Action[] = [
  {
    detail: 'delete in production',
    pattern:
      /(?:delet(?:e|ing)|drop(?:ping)?|truncat(?:e|ing)|wip(?:e|ing)|purg(?:e|ing)|destroy(?:ing)?|terminat(?:e|ing)|flush(?:ing)?|uninstall(?:ing)?|remov(?:e|ing)|nuke)\b/gi,
  },
  {
    detail: 'database migration on production',
    pattern:
      /migrat(?:e|ing)\b|db:migrate\b|migrate:\w+|(?:run|apply|execute|running|applying)\s{1,3}(?:(?:the|all|pending|new|db|database)\s{1,3}){0,3}migrations?\b|alembic\s{1,3}upgrade\b/gi,
  },
  {
    detail: 'rollback in production',
    pattern: /(?:roll(?:ing)?\s?back|rollback|revert(?:ing)?|restor(?:e|ing)|downgrad(?:e|ing)|rollout\s{1,3}undo)\b/gi,
  },
  {
    detail: 'restart or stop in production',
    pattern:
      /(?:restart(?:ing)?|reboot(?:ing)?|shut(?:ting)?\s?down|stop(?:ping)?|kill(?:ing)?|drain(?:ing)?|cordon|fail\s?over|recycl(?:e|ing))\b/gi,
  },
  {
    detail: 'scaling in production',
    pattern:
      /scal(?:e|ing)\s{1,3}(?:up|down|out|to|the|deployment|deploy|statefulset|sts|replicas?|--replicas|it|this|that|our|api|web|workers?)\b|autoscale\b/gi,
  },
  {
    detail: 'deploy to production',
    pattern:
      /(?:re)?deploy(?:ing)?\b|ship(?:ping)?\s{1,3}(?:it|this|that|the|to)\b|promot(?:e|ing)\b|push(?:ing)?\b(?!\s{1,3}notifications?)|rollout\b(?!\s{1,3}(?:status|history|pause|restart|undo))|roll(?:ing)?\s{1,3}out\b|releas(?:e|ing)\s{1,3}(?:(?:it|this|that|v?\d[\w.]{0,20})\s{1,3})?to\b/gi,
  },
  {
    detail: 'change applied to production',
    pattern:
      /(?:terraform|tofu|kubectl|pulumi|helm|ansible)\b[^\n.]{0,40}?\b(?:apply|up|upgrade|install|patch|replace|set)\b|apply(?:ing)?\s{1,3}(?:-f\b|(?:the|this|these|my|our|that)\b|changes?\b|patch\b|config\b|manifests?\b|plan\b|hotfix\b|fix\b)|ansible-playbook\b|updat(?:e|ing)\b(?!\s{1,3}(?:you|me|us|them|him|her|everyone|everybody|folks|the\s{1,3}team)\b)|(?:patch(?:ing)?|upgrad(?:e|ing)|install(?:ing)?|reindex(?:ing)?|edit(?:ing)?|modify(?:ing)?|chang(?:e|ing)|alter(?:ing)?|hotfix)\b/gi,
  },
  {
    detail: 'shell or database access to production',
    pattern:
      /(?:ssh|scp|rsync|psql|mysql|mongosh|redis-cli)\b(?!\s{1,3}(?:access|keys?|config|configuration|tunnel|client|server|agent)\b)|(?:kubectl|docker)\s{1,3}exec\b/gi,
  },
];

const WINDOW = 120;
const WORD = /\w/;
/** A sentence ends at . ! ? followed by whitespace, or at a blank line. */
const SENTENCE_END = /[.!?](?=\s)|\n[ \t]*\n/g;
/** A verb right after a determiner is a noun: "the deploy", "last restart", "any change". */
const DETERMINER =
  /\b(?:the|a|an|this|that|these|those|last|next|our|your|their|its|each|every|previous|recent|latest|first|any|no|one|weekly|nightly|daily|scheduled|(?!(?:let|it|that|what|here|there|who|he|she)'s)\w+'s)\s{1,3}(?:(?:prod|production|live)\s{1,3})?$/i;

/** Half-open [from, to) ranges, sorted and merged. */
type Span = [number, number];

/** Moves `index` back to the start of the word it falls in (at most 40 characters), so `\b` holds. */
function wordStart(text: string, index: number): number {
  let at = index;
  while (at > 0 && index - at < 40 && /\w/.test(text[at - 1])) at -= 1;
  return at;
}

interface Marker {
  readonly start: number;
  readonly end: number;
}

function markersIn(text: string): Marker[] {
  const markers: Marker[] = [];
  MARKER.lastIndex = 0;
  let marker: RegExpExecArray | null;
  while ((marker = MARKER.exec(text)) !== null) {
    markers.push({ start: marker.index, end: marker.index + marker[0].length });
  }
  return markers;
}

/** True when a verb at [from, to) and a marker are within WINDOW characters with no sentence break between. */
function nearMarker(text: string, markers: readonly Marker[], from: number, to: number): boolean {
  // Markers are sorted and disjoint: binary-search the first one that can be in reach.
  let lo = 0;
  let hi = markers.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (markers[mid].end < from - WINDOW) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < markers.length && markers[i].start <= to + WINDOW; i += 1) {
    const gapFrom = Math.min(to, markers[i].end);
    const gapTo = Math.max(from, markers[i].start);
    if (gapTo <= gapFrom) return true;
    SENTENCE_END.lastIndex = 0;
    if (!SENTENCE_END.test(text.slice(gapFrom, gapTo))) return true;
  }
  return false;
}

/** Every detail `detectProduction` can return, in the order its categories are tried. */
export const PRODUCTION_DETAILS: readonly string[] = ACTIONS.map((action) => action.detail);

/** Every marker contains one of these. */
export const PRODUCTION_ANCHORS: readonly string[] = ['prod', 'live'];
const scanAnchors = anchorScanner(PRODUCTION_ANCHORS);

/** Detail of the first risky production action found in `text`, or null. `present`: its anchors, if already scanned. */
export function detectProduction(text: string, present: Anchors = scanAnchors(text)): string | null {
  if (!present.has('prod') && !present.has('live')) return null;
  const markers = markersIn(text);
  if (markers.length === 0) return null;
  // Verbs are looked for only within WINDOW characters of a marker.
  const spans: Span[] = [];
  for (const marker of markers) {
    const last = spans[spans.length - 1];
    const from = Math.max(0, marker.start - WINDOW);
    const to = Math.min(text.length, marker.end + WINDOW);
    if (last !== undefined && from <= last[1]) last[1] = to;
    else spans.push([wordStart(text, from), to]);
  }
  for (const action of ACTIONS) {
    for (const [from, to] of spans) {
      const slice = text.slice(from, to);
      action.pattern.lastIndex = 0;
      let verb: RegExpExecArray | null;
      while ((verb = action.pattern.exec(slice)) !== null) {
        const at = from + verb.index;
        action.pattern.lastIndex = verb.index + 1;
        if (!atBoundary(text, at, WORD)) continue;
        if (!nearMarker(text, markers, at, at + verb[0].length)) continue;
        if (DETERMINER.test(text.slice(Math.max(0, at - 40), at))) continue;
        if (NEGATION.test(clauseBefore(text, at))) continue;
        action.pattern.lastIndex = 0;
        return action.detail;
      }
    }
  }
  return null;
}
