import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Transport, triageLine, type Cursor, type MailboxPage, type TriageHeader } from '#client';
import { resolveContext, writeJsonAtomic, type Flags } from './config';

/**
 * `roost hook`: run by harness hooks (Claude Code, Codex) on session start, after every tool call
 * and at stop. It speaks only when something is new since it last spoke, and never repeats a line.
 *
 * Fast path (nothing new), built to stay well under 100 ms: no commander, no Markdown parser, no
 * WebSocket library; read two small JSON files, stat three, make one loopback request for at most
 * one header, write nothing. Only when something changed does it load the worktree mailbox code.
 *
 * - With a worktree mailbox (`.roost/mailbox/`): the request asks for anything after the mirror's
 *   cursor; new mail, or an edited OUTBOX.md/RECEIPTS.md, runs one mirror pass; the lines printed
 *   are the INBOX.md blocks appended since the hook last spoke (by it or a `roost mirror` watcher).
 * - Without: the request lists unread headers; the lines printed are those not shown before.
 */

export interface HookOptions extends Flags {
  event?: string;
  json?: boolean;
}

interface HookState {
  /** Ids already shown (newest last, bounded). */
  shown: string[];
  /** INBOX.md size when last read. */
  inbox_size?: number;
  /** size:mtime of OUTBOX.md and RECEIPTS.md when last mirrored. */
  local?: string;
  /** INBOX.md size at the last SessionStart: blocks after it were announced to that session. */
  session_inbox_size?: number;
}

const SHOWN_MAX = 2000;

export function parseHookArgs(argv: string[]): HookOptions {
  const options: HookOptions = {};
  const keys: Record<string, 'event' | 'profile' | 'url' | 'as' | 'token'> = {
    '--event': 'event',
    '--profile': 'profile',
    '--url': 'url',
    '--as': 'as',
    '--token': 'token',
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--json') {
      options.json = true;
      continue;
    }
    const [flag, inline] = argv[i].split('=', 2);
    const key = keys[flag];
    if (!key) continue;
    options[key] = inline ?? argv[++i];
  }
  return options;
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

const stamp = (file: string) => {
  try {
    const s = statSync(file);
    return `${s.size}:${Math.floor(s.mtimeMs)}`;
  } catch {
    return '-';
  }
};

/** Wrap the text the way the harness shows it to the model. */
export function hookOutput(event: string | undefined, text: string, json = false): string {
  if (!event) return json ? `${JSON.stringify({ text })}\n` : `${text}\n`;
  if (event === 'Stop' || event === 'SubagentStop') return `${JSON.stringify({ decision: 'block', reason: text })}\n`;
  return `${JSON.stringify({ hookSpecificOutput: { hookEventName: event, additionalContext: text } })}\n`;
}

/** Triage headers from INBOX.md blocks (the part appended after `fromByte`). */
function inboxHeaders(file: string, fromByte: number): TriageHeader[] {
  /* eslint-disable @typescript-eslint/no-require-imports -- the hook's fast path loads modules only when needed */
  const { splitBlocks } = require('./mailbox/markdown') as typeof import('./mailbox/markdown');
  let text: string;
  try {
    text = readFileSync(file).subarray(fromByte).toString('utf8');
  } catch {
    return [];
  }
  const keys = [
    'from',
    'to',
    'cc',
    'subject',
    'date',
    'created_at',
    'in_reply_to',
    'type',
    'flags',
    'receipt',
    'schedule',
  ];
  return splitBlocks(text, keys)
    .filter((b) => /^01[0-9A-HJKMNP-TV-Z]{24}$/.test(b.heading) && b.meta.from)
    .map((b) => {
      const [typeHint, sizeText] = (b.meta.type ?? 'text').split(' ');
      const m = /^~(\d+(?:\.\d+)?)(k?)t$/.exec(sizeText ?? '');
      const [status, , envelopeId] = (b.meta.receipt ?? '').split(' ');
      return {
        id: b.heading,
        from: b.meta.from,
        ...(b.meta.cc ? { cc: b.meta.cc.split(/,\s*/) } : {}),
        ...(b.meta.subject !== undefined ? { subject: b.meta.subject } : {}),
        ...(b.meta.in_reply_to ? { in_reply_to: b.meta.in_reply_to } : {}),
        type_hint: typeHint,
        ...(m ? { size_hint: Math.round(Number(m[1]) * (m[2] ? 1000 : 1)) } : {}),
        created_at: Number(b.meta.created_at) || Date.now(),
        ...(b.meta.flags ? { flags: b.meta.flags.split(/,\s*/) } : {}),
        ...(status && envelopeId ? { receipt: { status, envelope_id: envelopeId } } : {}),
        ...(b.meta.schedule ? { schedule_id: b.meta.schedule } : {}),
      };
    });
}

/** What a check found: the text to show, and whether any of it is mail from someone else. */
interface HookNews {
  text: string;
  /** New mail from another agent. The agent's own sends, receipts and skipped blocks are not. */
  mail: boolean;
}

const isStop = (event: string | undefined) => event === 'Stop' || event === 'SubagentStop';

/** Lines shown at most for mail announced in an earlier session (the rest is counted). */
const EARLIER_MAX = 10;

/** Always exits 0: a hook must never break the harness; problems go to stderr. */
export async function runHook(options: HookOptions): Promise<number> {
  try {
    const news = await check(options);
    // Stop may only force another turn for mail someone else sent: the agent's own reply or receipt
    // going out is no reason to keep it working.
    if (news && (news.mail || !isStop(options.event)))
      process.stdout.write(hookOutput(options.event, news.text, options.json));
  } catch (error) {
    process.stderr.write(`roost hook: ${(error as Error).message}\n`);
  }
  return 0;
}

async function check(options: HookOptions): Promise<HookNews | undefined> {
  const ctx = resolveContext(options);
  if (!ctx.agent || !ctx.token) return undefined;
  const transport = new Transport(ctx.url, { timeoutMs: 5000, userAgent: 'roost-hook' });
  const mailboxDir = ctx.root ? join(ctx.root, '.roost', 'mailbox') : undefined;
  const stateFile = ctx.root
    ? join(ctx.root, '.roost', 'hook.json')
    : join(ctx.stateDir, 'hook', ctx.profile, `${ctx.agent.replace(/^@/, '')}.json`);
  const state = readJson<HookState>(stateFile) ?? { shown: [] };
  const shown = new Set(state.shown);
  const starting = options.event === 'SessionStart';

  if (mailboxDir && existsSync(mailboxDir)) {
    const inbox = join(mailboxDir, 'INBOX.md');
    const local = `${stamp(join(mailboxDir, 'OUTBOX.md'))}|${stamp(join(mailboxDir, 'RECEIPTS.md'))}`;
    const mirrorCursor =
      readJson<{ inbox?: { cursor?: Cursor | null } }>(join(mailboxDir, 'STATE.json'))?.inbox?.cursor ?? null;
    const page = await transport.json<MailboxPage>({
      method: 'GET',
      path: '/mailbox',
      token: ctx.token,
      query: mirrorCursor
        ? {
            order: 'asc',
            limit: 1,
            after_created_at: mirrorCursor.created_at,
            after_envelope_id: mirrorCursor.envelope_id,
          }
        : { unread: true, limit: 1 },
    });
    const inboxSize = existsSync(inbox) ? statSync(inbox).size : 0;
    const remoteNew = page.envelope_headers.length > 0;
    const changed = remoteNew || local !== state.local || inboxSize !== (state.inbox_size ?? 0);
    if (!changed && !starting) return undefined;

    const notes: string[] = [];
    let fresh: TriageHeader[] = [];
    if (changed) {
      if (remoteNew || local !== state.local) {
        const { RoostClient } = require('#client') as typeof import('#client');
        const { mirrorOnce } = require('./mailbox/mirror') as typeof import('./mailbox/mirror');
        const result = await mirrorOnce(
          new RoostClient({ url: ctx.url, token: ctx.token, userAgent: 'roost-hook' }),
          ctx.root!,
          ctx.agent,
        );
        for (const sent of result.sent)
          notes.push(
            `sent ${sent.in_reply_to ? `your reply to ${sent.in_reply_to.slice(-6)}` : 'your message'} to ${sent.to.join(', ')} (OUTBOX.md:${sent.line})`,
          );
        for (const r of result.receipts)
          notes.push(`posted receipt ${r.status} for ${r.envelope_id.slice(-6)} (RECEIPTS.md:${r.line})`);
        for (const p of result.problems) notes.push(`skipped ${p.file}:${p.line} "## ${p.heading}": ${p.reason}`);
      }
      fresh = inboxHeaders(inbox, Math.min(state.inbox_size ?? 0, existsSync(inbox) ? statSync(inbox).size : 0)).filter(
        (h) => !shown.has(h.id),
      );
    }
    // The mirror fetches bodies, so the operator's unread flag says nothing here: a new session is
    // told about the blocks announced to the sessions since the previous SessionStart.
    const freshIds = new Set(fresh.map((h) => h.id));
    const earlierHeaders = starting
      ? inboxHeaders(inbox, state.session_inbox_size ?? 0).filter((h) => shown.has(h.id) && !freshIds.has(h.id))
      : [];
    const earlier = earlierHeaders.length
      ? [
          `Roost: ${earlierHeaders.length} in .roost/mailbox/INBOX.md for ${ctx.agent} announced in an earlier session:`,
          ...earlierHeaders.slice(-EARLIER_MAX).map((h) => triageLine(h)),
          ...(earlierHeaders.length > EARLIER_MAX ? [`(the ${EARLIER_MAX} newest shown)`] : []),
        ]
      : [];
    if (changed || starting) {
      const size = existsSync(inbox) ? statSync(inbox).size : 0;
      const next: HookState = {
        shown: [...state.shown, ...fresh.map((h) => h.id)].slice(-SHOWN_MAX),
        inbox_size: size,
        local: `${stamp(join(mailboxDir, 'OUTBOX.md'))}|${stamp(join(mailboxDir, 'RECEIPTS.md'))}`,
        session_inbox_size: starting ? size : state.session_inbox_size,
      };
      writeJsonAtomic(stateFile, next);
    }
    if (fresh.length === 0 && notes.length === 0 && earlier.length === 0) return undefined;
    const lines = [];
    if (fresh.length) {
      lines.push(
        `Roost: ${fresh.length} new for ${ctx.agent} in .roost/mailbox/INBOX.md (id age from subject type size):`,
      );
      lines.push(...fresh.map((h) => triageLine(h)));
    }
    lines.push(...earlier);
    if (fresh.length || earlier.length)
      lines.push('Reply in .roost/mailbox/OUTBOX.md (## reply <id>), decisions in RECEIPTS.md (## <id> + status:).');
    if (notes.length) lines.push(...notes.map((n) => `Roost: ${n}`));
    return { text: lines.join('\n'), mail: fresh.some((h) => h.from !== ctx.agent) };
  }

  const page = await transport.json<MailboxPage>({
    method: 'GET',
    path: '/mailbox',
    token: ctx.token,
    query: { unread: true, order: 'asc', limit: 100 },
  });
  const fresh = page.envelope_headers.filter((h) => !shown.has(h.id));
  const earlier = starting ? page.envelope_headers.filter((h) => shown.has(h.id)) : [];
  if (fresh.length === 0 && earlier.length === 0) return undefined;
  if (fresh.length)
    writeJsonAtomic(stateFile, {
      shown: [...state.shown, ...fresh.map((h) => h.id)].slice(-SHOWN_MAX),
    } satisfies HookState);
  const lines = [];
  if (fresh.length)
    lines.push(
      `Roost: ${fresh.length} new unread for ${ctx.agent} (id age from subject type size):`,
      ...fresh.map((h) => triageLine(h)),
    );
  if (earlier.length) {
    lines.push(
      `Roost: ${earlier.length}${page.next_cursor !== null ? '+' : ''} unread for ${ctx.agent} announced in an earlier session:`,
      ...earlier.slice(0, EARLIER_MAX).map((h) => triageLine(h)),
      ...(earlier.length > EARLIER_MAX ? ['… and more: roost inbox'] : []),
    );
  }
  lines.push(
    'Read: roost show <id>. Reply: roost reply <id> -t "…". Decide: roost receipt <id> accepted|rejected|deferred|….',
  );
  return { text: lines.join('\n'), mail: fresh.some((h) => h.from !== ctx.agent) };
}
