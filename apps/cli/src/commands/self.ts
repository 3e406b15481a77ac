import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { age, shortId, subjectText, triageLine, type AgentSelf, type AgentSelfPatch, type Header } from '#client';
import { positiveInt, requireAllowlistEntry, requireHandle } from '../args';
import { CliError, EXIT } from '../output';
import type { Session } from '../session';
import { MIME } from './messages';

/**
 * The agent's own surface and discovery (ASMTP.md §3.7–3.9, §7): `me`, `agents`, `search`, `files`,
 * and the sent side of the mailbox. Every command takes `--json`; errors map to the exit-code table.
 */

const ago = (ms: number) => `${new Date(ms).toISOString()} (${age(Date.now() - ms)} ago)`;

export function agentView(agent: AgentSelf): string {
  const rows: Array<[string, unknown]> = [
    ['handle', agent.canonical_handle],
    ['display name', agent.display_name],
    ['description', agent.description],
    ['policy', agent.inbound_policy],
    ['visibility', agent.visibility],
    [
      'card',
      agent.card_body === null || agent.card_body === ''
        ? null
        : `${String(agent.card_body).split('\n').length} line(s): roost agents card ${agent.canonical_handle}`,
    ],
    ['updated', ago(agent.updated_at)],
  ];
  return rows
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${`${k}:`.padEnd(14)}${String(v)}`)
    .join('\n');
}

// --- me ---------------------------------------------------------------------------------------

export async function meShow(session: Session): Promise<void> {
  const me = await session.client().me();
  session.print.out(() => agentView(me), me);
}

export interface MeUpdateOptions {
  displayName?: string;
  description?: string;
  card?: string;
  cardFile?: string;
}

export async function meUpdate(session: Session, options: MeUpdateOptions): Promise<void> {
  const patch: AgentSelfPatch = {};
  if (options.displayName !== undefined) patch.display_name = options.displayName;
  if (options.description !== undefined) patch.description = options.description === '' ? null : options.description;
  if (options.card !== undefined && options.cardFile !== undefined)
    throw new CliError('give --card or --card-file, not both', EXIT.USAGE, undefined, 'BAD_OPTION');
  if (options.card !== undefined) patch.card_body = options.card === '' ? null : options.card;
  if (options.cardFile !== undefined) {
    try {
      patch.card_body = readFileSync(options.cardFile, 'utf8');
    } catch (error) {
      throw new CliError(
        `cannot read ${options.cardFile}: ${(error as Error).message}`,
        EXIT.USAGE,
        undefined,
        'BAD_FILE',
      );
    }
  }
  if (Object.keys(patch).length === 0)
    throw new CliError(
      'nothing to change',
      EXIT.USAGE,
      'give --display-name, --description, --card or --card-file',
      'EMPTY',
    );
  const me = await session.client().updateMe(patch);
  session.print.out(() => agentView(me), me);
}

export async function allowlistList(session: Session): Promise<void> {
  const entries = await session.client().allowlist();
  session.print.out(() => (entries.length ? entries.join('\n') : 'allowlist is empty'), { entries });
}

export async function allowlistAdd(session: Session, entries: string[]): Promise<void> {
  entries.forEach(requireAllowlistEntry);
  const after = await session.client().allow(entries);
  session.print.out(() => `allowlist: ${after.join(', ')}`, { entries: after });
}

export async function allowlistRemove(session: Session, entry: string): Promise<void> {
  requireAllowlistEntry(entry);
  const after = await session.client().disallow(entry);
  session.print.out(() => `allowlist: ${after.length ? after.join(', ') : '(empty)'}`, { entries: after });
}

export async function block(session: Session, handle: string): Promise<void> {
  requireHandle(handle, 'block target');
  const blocked = await session.client().block(handle);
  session.print.out(
    () => `blocked ${blocked.blocked_handle} since ${new Date(blocked.created_at).toISOString()}`,
    blocked,
  );
}

export async function unblock(session: Session, handle: string): Promise<void> {
  requireHandle(handle, 'block target');
  const result = await session.client().unblock(handle);
  session.print.out(() => `unblocked ${handle}`, { handle, ...result });
}

export async function blocks(session: Session, options: { limit?: string; cursor?: string }): Promise<void> {
  const page = await session.client().blocks({
    limit: positiveInt(options.limit, '--limit', 100),
    ...(options.cursor ? { cursor: options.cursor } : {}),
  });
  session.print.out(
    () =>
      [
        ...(page.blocks.length
          ? page.blocks.map((b) => `${b.blocked_handle} ${new Date(b.created_at).toISOString()}`)
          : ['no blocks']),
        ...(page.next_cursor ? [`more: --cursor ${page.next_cursor}`] : []),
      ].join('\n'),
    page,
  );
}

// --- agents -----------------------------------------------------------------------------------

export async function agentsShow(session: Session, handle: string): Promise<void> {
  requireHandle(handle);
  const found = await session.client().agent(handle);
  session.print.out(() => agentView(found.agent), found);
}

export async function agentsCard(session: Session, handle: string): Promise<void> {
  requireHandle(handle);
  const card = await session.client().card(handle);
  session.print.out(() => (card === '' ? `${handle} has no card` : card), { handle, card_body: card });
}

export async function agentsSearch(
  session: Session,
  query: string,
  options: { limit?: string; cursor?: string },
): Promise<void> {
  const page = await session.client().searchAgents(query, {
    limit: positiveInt(options.limit, '--limit', 50),
    ...(options.cursor ? { cursor: options.cursor } : {}),
  });
  session.print.out(
    () =>
      [
        ...(page.agents.length
          ? page.agents.map((a) => `${a.canonical_handle} ${JSON.stringify(a.display_name)}`)
          : ['no agents found']),
        ...(page.next_cursor ? [`more: --cursor ${page.next_cursor}`] : []),
      ].join('\n'),
    page,
  );
}

// --- search -----------------------------------------------------------------------------------

export async function search(
  session: Session,
  query: string,
  options: { scope?: string; limit?: string },
): Promise<void> {
  const limit = positiveInt(options.limit, '--limit', 50);
  if (options.scope === 'agents') return agentsSearch(session, query, { limit: options.limit });
  const hits = await session.client().searchMessages(query, limit);
  const now = Date.now();
  session.print.out(
    () =>
      hits.length
        ? [
            `${hits.length} found (id age from subject to):`,
            ...hits.map(
              (h) =>
                `${shortId(h.envelope_id)} ${age(now - h.created_at)} ${h.sender_handle} ${subjectText(h.subject ?? undefined)} to=${h.recipient_handles.join(',')}`,
            ),
          ].join('\n')
        : 'nothing found',
    { envelopes: hits },
  );
}

// --- the mailbox, any direction ------------------------------------------------------------------

/** A header as a triage line; on the sent side the counterpart is the recipients. */
export function directedLine(header: Header & { direction?: string; unread?: boolean }, now: number): string {
  if (header.direction === 'out' || header.direction === 'self') {
    const to = header.to.length > 1 ? `${header.to[0]},+${header.to.length - 1}` : header.to[0];
    return `${triageLine({ ...header, from: `→${to}` }, now)}${header.direction === 'self' ? ' self' : ''}`;
  }
  return `${triageLine(header, now)}${header.unread ? ' unread' : ''}`;
}

export async function mailbox(
  session: Session,
  options: { direction?: string; limit?: string; unread?: boolean; order?: string },
): Promise<void> {
  const direction = (options.direction ?? 'out') as 'in' | 'out' | 'both';
  if (!['in', 'out', 'both'].includes(direction))
    throw new CliError('--direction must be in, out or both', EXIT.USAGE, undefined, 'BAD_OPTION');
  if (options.unread && direction !== 'in')
    throw new CliError('--unread only applies to --direction in', EXIT.USAGE, undefined, 'BAD_OPTION');
  const order = (options.order ?? 'desc') as 'asc' | 'desc';
  if (order !== 'asc' && order !== 'desc')
    throw new CliError('--order must be asc or desc', EXIT.USAGE, undefined, 'BAD_OPTION');
  const page = await session.client().mailbox({
    direction,
    order,
    limit: positiveInt(options.limit, '--limit', 1000) ?? 50,
    ...(options.unread ? { unread: true } : {}),
  });
  const now = Date.now();
  const headers = page.envelope_headers as Array<Header & { direction?: string; unread?: boolean }>;
  session.print.out(
    () =>
      headers.length
        ? [
            `${headers.length}${page.next_cursor ? '+' : ''} ${direction === 'out' ? 'sent' : direction === 'in' ? 'received' : 'sent and received'} (id age from|→to subject type size):`,
            ...headers.map((h) => directedLine(h, now)),
          ].join('\n')
        : 'nothing listed',
    { headers, more: page.next_cursor !== null },
  );
}

// --- files ------------------------------------------------------------------------------------

export async function filesUpload(session: Session, path: string, options: { type?: string }): Promise<void> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new CliError(`cannot read ${path}: ${(error as Error).message}`, EXIT.USAGE, undefined, 'BAD_FILE');
  }
  const extension = /\.[^.]+$/.exec(path.toLowerCase())?.[0] ?? '';
  const uploaded = await session
    .client()
    .uploadFile(bytes, basename(path), options.type ?? MIME[extension] ?? 'application/octet-stream');
  session.print.out(
    () =>
      `uploaded ${uploaded.id} ${uploaded.filename} ${uploaded.content_type} ${uploaded.size_bytes} bytes; attach it once with: roost send <to> --file ${uploaded.id}`,
    uploaded,
  );
}

export async function filesDownload(
  session: Session,
  idOrUrl: string,
  options: { out?: string; force?: boolean },
): Promise<void> {
  if (!/^file_[0-9A-Za-z_-]+$/.test(idOrUrl) && !/^https?:\/\//.test(idOrUrl)) {
    throw new CliError(
      `${idOrUrl} is neither a file id (file_…) nor a file URL`,
      EXIT.USAGE,
      'the url of a file part, as `roost show` prints it, or the id `roost files upload` printed',
      'BAD_ID',
    );
  }
  const file = await session.client().downloadFile(idOrUrl);
  const out = options.out ?? file.filename ?? basename(idOrUrl.split('?')[0]);
  if (out !== '-' && existsSync(out) && !options.force)
    throw new CliError(`${out} exists`, EXIT.USAGE, 'pass --out <path>, or --force to overwrite', 'EXISTS');
  if (out === '-') process.stdout.write(file.bytes);
  else writeFileSync(out, file.bytes);
  if (out !== '-')
    session.print.out(() => `saved ${file.bytes.length} bytes (${file.contentType}) to ${out}`, {
      path: out,
      size_bytes: file.bytes.length,
      content_type: file.contentType,
    });
}
