import { appendFileSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  bodyText,
  compareCursors,
  ENVELOPE_ID_RE,
  RECEIPT_STATUSES,
  RoostError,
  size,
  ulid,
  writeFileAtomic,
  type Cursor,
  type Header,
  type ReceiptStatus,
  type RoostClient,
  type StoredEnvelope,
} from '#client';
import { blockKeys, fence, oneLine, splitBlocks, type Malformed, type RawBlock } from './markdown';
import { withLock } from './lock';

/**
 * The worktree mailbox (`.roost/mailbox/`): one writer per file, nothing ever rewritten.
 *
 * - INBOX.md: written only here. One H2 block per envelope (`## <id>`, `key: value` lines, the
 *   body in a fence longer than any backtick run in it), appended.
 * - OUTBOX.md: written by the agent. `## reply <id>` or `## to @a.b [@c.d]`, optional `subject:`
 *   and `cc:` lines, then the body. Each block is sent once.
 * - RECEIPTS.md: written by the agent. `## <id>` with `status:` and optional `note:`. Posted once.
 * - STATE.json: written only here (atomically): the inbound cursor, what was appended and sent.
 *
 * A pass runs under a cross-process lock, so two `roost mirror` processes never append or send
 * twice. A malformed block is skipped and reported once, never rewritten.
 */

export interface MailboxPaths {
  dir: string;
  inbox: string;
  outbox: string;
  receipts: string;
  state: string;
  lock: string;
}

export function mailboxPaths(root: string): MailboxPaths {
  const dir = join(root, '.roost', 'mailbox');
  return {
    dir,
    inbox: join(dir, 'INBOX.md'),
    outbox: join(dir, 'OUTBOX.md'),
    receipts: join(dir, 'RECEIPTS.md'),
    state: join(dir, 'STATE.json'),
    lock: join(dir, '.lock'),
  };
}

interface SendRecord {
  id: string;
  /** sent | pending (id chosen, send not confirmed: a retry reuses the id) | failed (refused for good) */
  state: 'sent' | 'pending' | 'failed';
  error?: string;
}

export interface MirrorState {
  version: 1;
  agent: string;
  inbox: { cursor: Cursor | null; size: number; ids: string[] };
  outbox: Record<string, SendRecord>;
  receipts: Record<string, SendRecord>;
  /** Keys of malformed blocks already reported. */
  reported: string[];
}

export interface MirrorResult {
  appended: Header[];
  sent: Array<{ line: number; id: string; to: string[]; in_reply_to?: string }>;
  receipts: Array<{ line: number; id: string; envelope_id: string; status: ReceiptStatus }>;
  /** Newly found malformed blocks and refused sends (each reported once). */
  problems: Array<{ file: string; line: number; heading: string; reason: string }>;
}

const OUTBOX_META = ['subject', 'cc'] as const;
const RECEIPT_META = ['status', 'note'] as const;
const MAX_IDS = 5000;

export const INBOX_TITLE = (agent: string) =>
  `# Inbox of ${agent}\n\nWritten by \`roost mirror\`, append-only: do not edit. Reply in OUTBOX.md, receipts in RECEIPTS.md.\n`;
export const OUTBOX_TEMPLATE = `# Outbox\n\nAppend one block per message, never edit sent ones:\n\n    ## reply <id>            (or: ## to @owner.name)\n    subject: optional\n\n    Markdown body\n`;
export const RECEIPTS_TEMPLATE = `# Receipts\n\nAppend one block per decision:\n\n    ## <id>\n    status: accepted | rejected | deferred | needs_confirmation | applied | blocked\n    note: optional, one line\n`;

export function loadState(paths: MailboxPaths, agent: string): MirrorState {
  try {
    const state = JSON.parse(readFileSync(paths.state, 'utf8')) as MirrorState;
    if (state.version === 1) return state;
  } catch {
    // missing or corrupt: rebuilt from INBOX.md below
  }
  return { version: 1, agent, inbox: { cursor: null, size: -1, ids: [] }, outbox: {}, receipts: {}, reported: [] };
}

export function saveState(paths: MailboxPaths, state: MirrorState): void {
  state.inbox.ids = state.inbox.ids.slice(-MAX_IDS);
  state.reported = state.reported.slice(-MAX_IDS);
  writeFileAtomic(paths.state, `${JSON.stringify(state, null, 1)}\n`, 0o600);
}

const fileSize = (file: string) => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

const readText = (file: string) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};

/** The ids INBOX.md holds (recovery after a crash between append and state save). */
export function inboxIds(text: string): string[] {
  return splitBlocks(text, [])
    .map((b) => b.heading)
    .filter((h) => ENVELOPE_ID_RE.test(h));
}

export function renderInboxBlock(header: Header, envelope: StoredEnvelope | undefined): string {
  const meta: Array<[string, string]> = [
    ['from', header.from],
    ['to', header.to.join(', ')],
  ];
  if (header.cc) meta.push(['cc', header.cc.join(', ')]);
  if (header.subject !== undefined) meta.push(['subject', oneLine(header.subject)]);
  meta.push(['date', new Date(header.date_ms).toISOString()]);
  meta.push(['created_at', String(header.created_at)]);
  if (header.in_reply_to) meta.push(['in_reply_to', header.in_reply_to]);
  meta.push(['type', `${header.type_hint} ${size(header.size_hint)}`.trim()]);
  if (header.flags?.length) meta.push(['flags', header.flags.join(', ')]);
  if (header.receipt) meta.push(['receipt', `${header.receipt.status} for ${header.receipt.envelope_id}`]);
  if (header.schedule_id) meta.push(['schedule', header.schedule_id]);
  const body = envelope ? bodyText(envelope) : '(body unavailable: purged or not entitled)';
  return `\n## ${header.id}\n\n${meta.map(([k, v]) => `${k}: ${v}`).join('\n')}\n\n${fence(body)}\n`;
}

/** Resolve `<id>` or a short id against what INBOX.md holds. */
function resolveLocal(id: string, known: string[]): string | undefined {
  const wanted = id.toUpperCase();
  if (ENVELOPE_ID_RE.test(wanted)) return wanted;
  if (!/^[0-9A-HJKMNP-TV-Z]{4,25}$/.test(wanted)) return undefined;
  const matches = [...new Set(known.filter((k) => k.endsWith(wanted)))];
  return matches.length === 1 ? matches[0] : undefined;
}

const permanent = (error: unknown) =>
  error instanceof RoostError &&
  error.kind === 'api' &&
  error.status >= 400 &&
  error.status < 500 &&
  error.status !== 401 &&
  error.status !== 429;

export async function mirrorOnce(client: RoostClient, root: string, agent: string): Promise<MirrorResult> {
  const paths = mailboxPaths(root);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  return withLock(paths.lock, async () => {
    const state = loadState(paths, agent);
    const result: MirrorResult = { appended: [], sent: [], receipts: [], problems: [] };
    const inboxSize = fileSize(paths.inbox);
    if (inboxSize !== state.inbox.size) {
      // INBOX.md changed behind STATE.json (crash after an append, or STATE.json lost): trust the file.
      const ids = new Set(state.inbox.ids);
      for (const id of inboxIds(readText(paths.inbox))) ids.add(id);
      state.inbox.ids = [...ids];
    }
    await pullInbox(client, paths, state, result);
    saveState(paths, state);
    await pushOutbox(client, paths, state, result);
    await pushReceipts(client, paths, state, result);
    saveState(paths, state);
    return result;
  });
}

async function pullInbox(
  client: RoostClient,
  paths: MailboxPaths,
  state: MirrorState,
  result: MirrorResult,
): Promise<void> {
  const known = new Set(state.inbox.ids);
  const fresh: Header[] = [];
  let cursor = state.inbox.cursor;
  if (cursor === null && state.inbox.ids.length === 0) {
    // A new mailbox starts with the unread mail, then follows everything that arrives.
    for await (const header of client.headers({ unread: true, order: 'asc', limit: 1000 })) fresh.push(header);
    const newest = (await client.mailbox({ order: 'desc', limit: 1 })).envelope_headers[0];
    cursor = newest ? { created_at: newest.created_at, envelope_id: newest.id } : null;
    if (cursor === null) cursor = { created_at: 0, envelope_id: '01000000000000000000000000' };
  } else {
    for await (const header of client.headers({ order: 'asc', limit: 1000, after: cursor })) {
      fresh.push(header);
      const position = { created_at: header.created_at, envelope_id: header.id };
      if (cursor === null || compareCursors(position, cursor) > 0) cursor = position;
    }
  }
  const todo = fresh.filter((h) => !known.has(h.id));
  if (todo.length > 0) {
    const bodies = new Map((await client.messages(todo.map((h) => h.id))).map((e) => [e.id, e]));
    const text = todo.map((h) => renderInboxBlock(h, bodies.get(h.id))).join('');
    if (!existsSync(paths.inbox)) appendFileSync(paths.inbox, INBOX_TITLE(state.agent), { mode: 0o644 });
    appendFileSync(paths.inbox, text);
    for (const h of todo) state.inbox.ids.push(h.id);
    result.appended.push(...todo);
  }
  state.inbox.cursor = cursor;
  state.inbox.size = fileSize(paths.inbox);
}

function report(state: MirrorState, result: MirrorResult, file: string, bad: Malformed): void {
  if (state.reported.includes(bad.key)) return;
  state.reported.push(bad.key);
  result.problems.push({ file, line: bad.line, heading: bad.heading, reason: bad.reason });
}

const handleList = (text: string) => text.split(/[\s,]+/).filter(Boolean);
const HANDLE_RE = /^@[a-z0-9_-]+\.[a-z0-9_-]+$/;

async function pushOutbox(
  client: RoostClient,
  paths: MailboxPaths,
  state: MirrorState,
  result: MirrorResult,
): Promise<void> {
  const blocks = splitBlocks(readText(paths.outbox), OUTBOX_META);
  const keys = blockKeys(blocks);
  for (const [i, block] of blocks.entries()) {
    const key = keys[i];
    const record = state.outbox[key];
    if (record && record.state !== 'pending') continue;
    const bad = (reason: string) =>
      report(state, result, 'OUTBOX.md', { line: block.line, heading: block.heading, reason, key });
    const [verb, ...args] = block.heading.split(/\s+/);
    if (block.body === '') {
      bad('no body');
      continue;
    }
    const cc = block.meta.cc ? handleList(block.meta.cc) : [];
    if (cc.some((h) => !HANDLE_RE.test(h))) {
      bad(`cc must list handles (@owner.name): ${block.meta.cc}`);
      continue;
    }
    let draft: Parameters<RoostClient['send']>[0];
    if (verb === 'reply' && args.length === 1) {
      const target = resolveLocal(args[0], state.inbox.ids);
      if (!target) {
        bad(`reply target ${args[0]} is not an envelope id in INBOX.md`);
        continue;
      }
      let original: StoredEnvelope;
      try {
        original = await client.message(target);
      } catch (error) {
        if (!permanent(error)) throw error;
        bad(`reply target ${target}: ${(error as Error).message}`);
        continue;
      }
      const subject =
        block.meta.subject ??
        (original.subject === undefined
          ? undefined
          : /^re:/i.test(original.subject)
            ? original.subject
            : `Re: ${original.subject}`);
      draft = {
        to: original.from === state.agent ? original.to : [original.from],
        in_reply_to: original.id,
        references: [...(original.references ?? []), original.id],
        content_parts: [{ type: 'text', text: block.body }],
        ...(subject !== undefined ? { subject } : {}),
      };
    } else if (verb === 'to' && args.length > 0 && handleList(args.join(' ')).every((h) => HANDLE_RE.test(h))) {
      draft = {
        to: handleList(args.join(' ')),
        content_parts: [{ type: 'text', text: block.body }],
        ...(block.meta.subject !== undefined ? { subject: block.meta.subject } : {}),
      };
    } else {
      bad('the heading must be `## reply <id>` or `## to @owner.name`');
      continue;
    }
    if (cc.length) draft.cc = cc;
    // Write-ahead: the id is saved before the send, so a crash and a retry reuse it (idempotent 202).
    const id = record?.id ?? ulid();
    state.outbox[key] = { id, state: 'pending' };
    saveState(paths, state);
    try {
      await client.send({ ...draft, id });
      state.outbox[key] = { id, state: 'sent' };
      result.sent.push({
        line: block.line,
        id,
        to: draft.to,
        ...(draft.in_reply_to ? { in_reply_to: draft.in_reply_to } : {}),
      });
    } catch (error) {
      if (!permanent(error)) throw error;
      state.outbox[key] = { id, state: 'failed', error: (error as Error).message };
      bad(`refused by the operator: ${(error as RoostError).code} ${(error as Error).message}`);
    }
  }
}

async function pushReceipts(
  client: RoostClient,
  paths: MailboxPaths,
  state: MirrorState,
  result: MirrorResult,
): Promise<void> {
  const blocks: RawBlock[] = splitBlocks(readText(paths.receipts), RECEIPT_META);
  const keys = blockKeys(blocks);
  for (const [i, block] of blocks.entries()) {
    const key = keys[i];
    const record = state.receipts[key];
    if (record && record.state !== 'pending') continue;
    const bad = (reason: string) =>
      report(state, result, 'RECEIPTS.md', { line: block.line, heading: block.heading, reason, key });
    const [idText, inlineStatus, ...extra] = block.heading.split(/\s+/);
    const envelopeId = resolveLocal(idText ?? '', state.inbox.ids);
    if (!envelopeId || extra.length > 0) {
      bad('the heading must be `## <id>` (an envelope id in INBOX.md)');
      continue;
    }
    const status = (block.meta.status ?? inlineStatus ?? '') as ReceiptStatus;
    if (!RECEIPT_STATUSES.includes(status)) {
      bad(`status must be one of ${RECEIPT_STATUSES.join(', ')}`);
      continue;
    }
    const note = block.meta.note ?? (block.body || undefined);
    if (note !== undefined && note.length > 2000) {
      bad('note longer than 2000 characters');
      continue;
    }
    const id = record?.id ?? ulid();
    state.receipts[key] = { id, state: 'pending' };
    saveState(paths, state);
    try {
      await client.postReceipt(envelopeId, { status, id, ...(note ? { note } : {}) });
      state.receipts[key] = { id, state: 'sent' };
      result.receipts.push({ line: block.line, id, envelope_id: envelopeId, status });
    } catch (error) {
      if (!permanent(error)) throw error;
      state.receipts[key] = { id, state: 'failed', error: (error as Error).message };
      bad(`refused by the operator: ${(error as RoostError).code} ${(error as Error).message}`);
    }
  }
}
