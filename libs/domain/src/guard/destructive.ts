import { anchorScanner, anchorsOf, firstMatch, type Anchors, type Rule } from './rules';

/**
 * `destructive`: commands that delete or overwrite in bulk. Only command-shaped text counts: `rm`
 * needs a recursive flag (or a force flag on a glob / root-like path), SQL needs an identifier and
 * a statement end after it (so "the DROP TABLE statement" or "drop me a line" never match), and
 * `git push` needs a force flag or a `+refspec`.
 */

const WORD = /\w/;

interface RmOptions {
  recursive: boolean;
  force: boolean;
}

function rmOptions(flags: string): RmOptions {
  const options: RmOptions = { recursive: false, force: false };
  for (const flag of flags.trim().split(/\s+/)) {
    if (flag.startsWith('--')) {
      if (flag === '--recursive') options.recursive = true;
      if (flag === '--force' || flag === '--no-preserve-root') options.force = true;
    } else {
      if (/[rR]/.test(flag)) options.recursive = true;
      if (flag.includes('f')) options.force = true;
    }
  }
  return options;
}

/** Globs and paths whose forced deletion takes everything with it. */
const ROOT_LIKE =
  /[*?]|^(?:\/|~\/?|\$HOME\/?|\$\{HOME\}\/?|\.{1,2}\/?|\/(?:etc|usr|var|bin|boot|home|lib|lib64|opt|root|sbin|srv|sys|proc|dev)\/?)$/;

// `rm`, its option words, then the first operand (a quote before it is skipped).
const RM = String.raw`rm((?:\s{1,4}-{1,2}[A-Za-z][A-Za-z-]{0,30}){1,8})\s{1,4}["']?([^\s;&|)'"\x60]{1,200})`;

/** Up to seven `git push` arguments before the one that matters, on the same line. */
const GIT_ARGS = String.raw`(?:[ \t]+[^\s;&|]{1,200}){0,7}?`;

const IDENT_PART = String.raw`(?:[A-Za-z_][\w$]{0,63}|"[^"\n]{1,64}"|\x60[^\x60\n]{1,64}\x60|\[[^\]\n]{1,64}\])`;
/** Words that follow "DROP TABLE" in prose about SQL rather than in SQL: "the DROP TABLE statement". */
const NOT_AN_OBJECT = String.raw`(?!(?:statements?|commands?|clauses?|keywords?|syntax|privileges?|permissions?|quer(?:y|ies)|operations?|calls?|support|behaviou?rs?|semantics|rights|grants?|cascade|restrict|if)\b)`;
const IDENT = String.raw`${NOT_AN_OBJECT}${IDENT_PART}(?:\.${IDENT_PART}){0,2}`;
/** After the object name: end of statement, end of line, end of a quoted/code span, or CASCADE. */
const SQL_END = String.raw`(?=\s*(?:;|\)|\x60|"|'|--|,|$)|[ \t]*\r?\n|\s+(?:cascade|restrict)\b)`;

const sqlDrop = (kind: string): Rule => ({
  detail: `SQL DROP ${kind}`,
  anchors: ['drop'],
  notAfter: WORD,
  pattern: new RegExp(String.raw`drop\s+${kind}\s+(?:if\s+exists\s+)?${IDENT}${SQL_END}`, 'gi'),
});

const DESTRUCTIVE_RULES: readonly Rule[] = [
  // Specific commands before the generic `rm`: "gsutil rm -r" names the bucket delete.
  {
    detail: 'bucket delete (aws s3 rb --force)',
    anchors: ['--force'],
    notAfter: WORD,
    pattern: /aws\s+s3\s+rb\s[^\n;&|]{0,300}?--force\b/g,
  },
  {
    detail: 'recursive bucket delete (aws s3 rm --recursive)',
    anchors: ['--recursive'],
    notAfter: WORD,
    pattern: /aws\s+s3\s+rm\s[^\n;&|]{0,300}?--recursive\b/g,
  },
  {
    detail: 'recursive bucket delete (gsutil/gcloud storage rm -r)',
    anchors: ['gsutil', 'gcloud'],
    notAfter: WORD,
    pattern:
      /(?:gsutil(?:\s+-m)?|gcloud\s+storage)\s+rm\s[^\n;&|]{0,300}?(?:--recursive|-[a-zA-Z]{0,3}[rR][a-zA-Z]{0,3})(?![\w-])/g,
  },
  {
    detail: 'recursive delete (rm -rf)',
    anchors: ['rm'],
    pattern: new RegExp(RM, 'g'),
    notAfter: /[\w./-]/,
    accept: (match) => {
      const options = rmOptions(match[1]);
      return options.recursive && options.force;
    },
  },
  {
    detail: 'recursive delete (rm -r)',
    anchors: ['rm'],
    pattern: new RegExp(RM, 'g'),
    notAfter: /[\w./-]/,
    accept: (match) => rmOptions(match[1]).recursive,
  },
  {
    detail: 'forced delete of a glob or root path (rm -f)',
    anchors: ['rm'],
    pattern: new RegExp(RM, 'g'),
    notAfter: /[\w./-]/,
    accept: (match) => rmOptions(match[1]).force && ROOT_LIKE.test(match[2]),
  },
  {
    detail: 'recursive delete (Remove-Item -Recurse)',
    anchors: ['remove-item'],
    pattern: /Remove-Item\b[^\n;|]{0,200}?\s-Recurse\b/gi,
    notAfter: WORD,
  },
  {
    detail: 'recursive delete (rmdir /s)',
    anchors: ['/s'],
    pattern: /(?:rmdir|rd|del)\s(?:[^\n;&|]{0,100}?\s)?\/s\b/gi,
    notAfter: WORD,
  },
  sqlDrop('DATABASE'),
  sqlDrop('TABLE'),
  sqlDrop('SCHEMA'),
  {
    detail: 'SQL TRUNCATE',
    anchors: ['truncate'],
    notAfter: WORD,
    pattern: new RegExp(String.raw`truncate\s+(?:table\s+)?(?:only\s+)?${IDENT}${SQL_END}`, 'gi'),
    // Lower-case "truncate x" is English unless the TABLE keyword says otherwise.
    accept: (match) => match[0].startsWith('TRUNCATE') || /^truncate\s+table\s/i.test(match[0]),
  },
  {
    detail: 'SQL DELETE without WHERE',
    anchors: ['delete'],
    notAfter: WORD,
    pattern: new RegExp(
      String.raw`delete\s+from\s+(?:only\s+)?${IDENT}(?=\s*(?:;|\)|\x60|"|'|$)|[ \t]*\r?\n(?!\s*where\b)|\s+returning\b)`,
      'gi',
    ),
    accept: (match, text) =>
      match[0].startsWith('DELETE') ||
      /^\s*;/.test(text.slice(match.index + match[0].length, match.index + match[0].length + 8)),
  },
  {
    detail: 'SQL DELETE of every row (WHERE 1=1)',
    anchors: ['delete'],
    notAfter: WORD,
    pattern: new RegExp(
      String.raw`delete\s+from\s+(?:only\s+)?${IDENT}\s+where\s+(?:1\s*=\s*1|true|'1'\s*=\s*'1')(?=\s*(?:;|\)|\x60|"|'|$)|[ \t]*\r?\n)`,
      'gi',
    ),
  },
  {
    detail: 'Redis flush (FLUSHALL/FLUSHDB)',
    anchors: ['flush'],
    pattern: /FLUSH(?:ALL|DB)\b|redis-cli\b[^\n;&|]{0,120}?\sflush(?:all|db)\b/g,
    notAfter: WORD,
  },
  {
    detail: 'MongoDB dropDatabase()',
    anchors: ['dropdatabase'],
    pattern: /\.dropDatabase\(\s*\)/g,
  },
  {
    detail: 'force push (git push --force)',
    anchors: ['push'],
    notAfter: WORD,
    pattern: new RegExp(
      String.raw`git\s+(?:-C\s+\S{1,200}\s+)?push${GIT_ARGS}[ \t]+(?:--force(?:-with-lease(?:=\S*)?|-if-includes)?|-[a-zA-Z]{0,4}f[a-zA-Z]{0,4}|\+[^\s;&|]{1,200})(?=[\s;&|]|$)`,
      'g',
    ),
  },
  {
    detail: 'remote branch delete (git push --delete)',
    anchors: ['push'],
    notAfter: WORD,
    pattern: new RegExp(
      String.raw`git\s+(?:-C\s+\S{1,200}\s+)?push${GIT_ARGS}[ \t]+(?:--delete|-d|:[\w./-]{1,200})(?=[\s;&|]|$)`,
      'g',
    ),
  },
  {
    detail: 'history rewrite (git reset --hard + push)',
    anchors: ['--hard'],
    notAfter: WORD,
    pattern: /git\s+reset\s+--hard\b[\s\S]{0,300}?\bgit\s+push\b/g,
  },
  {
    detail: 'format filesystem (mkfs)',
    anchors: ['mkfs', 'mke2fs'],
    notAfter: /[\w-]/,
    pattern: /(?:mkfs(?:\.\w{1,10})?|mke2fs)\s[^\n;&|]{0,120}?\/dev\/\w/g,
  },
  {
    detail: 'disk wipe (wipefs/shred on /dev/...)',
    anchors: ['wipefs', 'shred'],
    notAfter: /[\w-]/,
    pattern: /(?:wipefs|shred)\s[^\n;&|]{0,120}?\/dev\/\w/g,
  },
  {
    detail: 'raw disk write (dd of=/dev/...)',
    anchors: ['of=/dev/'],
    notAfter: /[\w-]/,
    pattern: /dd\s[^\n;&|]{0,200}?\bof=\/dev\/(?!null\b|zero\b|std(?:out|err)\b|fd\/|tty)\w/g,
  },
  {
    detail: 'raw disk write (> /dev/...)',
    anchors: ['/dev/'],
    pattern: />\s{0,3}\/dev\/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d)/g,
  },
  {
    detail: 'format drive (format C:)',
    anchors: ['format'],
    notAfter: /[\w-]/,
    pattern: /format\s+[A-Za-z]:(?=\s|$|\/)/g,
  },
  {
    detail: 'recursive permission change on a system path (chmod/chown -R)',
    anchors: ['chmod', 'chown', 'chgrp'],
    notAfter: /[\w-]/,
    pattern:
      /(?:chmod|chown|chgrp)(?:\s{1,4}-[A-Za-z-]{1,20}){0,4}?\s{1,4}(?:-[A-Za-z]{0,4}R[A-Za-z]{0,4}|--recursive)(?:\s{1,4}-[A-Za-z-]{1,20}){0,4}\s{1,4}\S{1,64}\s{1,4}\/(?:\*|etc|usr|var|bin|boot|home|lib|lib64|opt|root|sbin|srv|sys)?\/?(?=[\s;&|)'"\x60]|$)/g,
  },
  {
    detail: 'Kubernetes namespace delete (kubectl delete namespace)',
    anchors: ['kubectl'],
    notAfter: WORD,
    pattern: /kubectl\b[^\n;&|]{0,120}?\sdelete\s+(?:namespaces?|ns)\b/g,
  },
  {
    detail: 'Kubernetes bulk delete (kubectl delete --all)',
    anchors: ['kubectl'],
    notAfter: WORD,
    pattern: /kubectl\b[^\n;&|]{0,120}?\sdelete\b[^\n;&|]{0,200}?\s(?:--all|--all-namespaces|-A)(?![\w-])/g,
  },
  {
    detail: 'infrastructure teardown (terraform destroy)',
    anchors: ['destroy'],
    notAfter: WORD,
    pattern: /(?:terraform|tofu)\s+(?:-chdir=\S{1,200}\s+)?(?:destroy\b|apply\s[^\n;&|]{0,200}?-destroy\b)/g,
  },
  {
    detail: 'infrastructure teardown (pulumi/cdk destroy)',
    anchors: ['destroy', 'remove'],
    notAfter: WORD,
    pattern: /(?:pulumi|cdk|sls|serverless)\s+(?:destroy|remove)\b/g,
  },
  {
    detail: 'cloud resource delete',
    anchors: ['delete', 'terminate-instances'],
    notAfter: WORD,
    pattern:
      /(?:aws\s+(?:rds\s+delete-db-(?:instance|cluster)|dynamodb\s+delete-table|cloudformation\s+delete-stack|ec2\s+terminate-instances|eks\s+delete-cluster|s3api\s+delete-bucket)|az\s+group\s+delete|gcloud\s+(?:projects|sql\s+instances|container\s+clusters|compute\s+instances)\s+delete)\b/g,
  },
  {
    detail: 'fork bomb',
    anchors: [':('],
    pattern: /:\(\)\s{0,3}\{\s{0,3}:\s{0,3}\|\s{0,3}:\s{0,3}&\s{0,3}\}\s{0,3};\s{0,3}:/g,
  },
];

/** Every detail `detectDestructive` can return, in the order its rules are tried. */
export const DESTRUCTIVE_DETAILS: readonly string[] = DESTRUCTIVE_RULES.map((rule) => rule.detail);

export const DESTRUCTIVE_ANCHORS: readonly string[] = anchorsOf(DESTRUCTIVE_RULES);
const scanAnchors = anchorScanner(DESTRUCTIVE_ANCHORS);

/** Detail of the first kind of destructive command found in `text`, or null. */
export function detectDestructive(text: string, present: Anchors = scanAnchors(text)): string | null {
  return firstMatch(DESTRUCTIVE_RULES, text, present);
}
