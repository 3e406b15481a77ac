import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { deterministicUlid, partText, RoostClient, RoostError, type StoredEnvelope } from '#client';
import { credentialsFile, readJson, type Credentials } from '../config';
import { CliError, EXIT } from '../output';
import {
  AliasMap,
  deriveThread,
  importId,
  readLog,
  refusalSummary,
  sampId,
  type Refusal,
  type SampRecord,
} from '../samp';
import { USER_AGENT, type Session } from '../session';

const LOG_RE = /^log-(.+)\.jsonl$/;

function logFiles(dir: string): Array<{ alias: string; file: string }> {
  if (!existsSync(dir))
    throw new CliError(`${dir} does not exist`, EXIT.USAGE, 'give the SAMP directory ($AGENT_MESSAGE_DIR)', 'NO_DIR');
  return readdirSync(dir)
    .map((name) => LOG_RE.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ alias: m[1], file: join(dir, m[0]) }));
}

/** The envelope a record becomes; byte-identical on every import, so a re-import is a 202 replay. */
export function recordEnvelope(record: SampRecord, fromHandle: string, to: string) {
  return {
    id: importId(record, fromHandle, deterministicUlid).id,
    to: [to],
    date_ms: record.ts * 1000,
    subject: record.thread,
    content_parts: [{ type: 'text' as const, text: record.body === '' ? '(empty)' : record.body }],
  };
}

/**
 * Post every record of every `log-<alias>.jsonl` as an envelope from the mapped sender, with the
 * sender's token: the acting agent's, or one stored in this profile's credentials (`roost admin
 * agent create` stores them). Records whose sender has no token here are counted as skipped.
 */
export async function importDir(
  session: Session,
  dir: string,
  options: { owner?: string; map?: string[] },
): Promise<void> {
  const owner = options.owner ?? session.ctx.agent?.slice(1, session.ctx.agent.indexOf('.'));
  let aliases: AliasMap;
  try {
    aliases = new AliasMap(options.map ?? [], owner);
  } catch (error) {
    throw new CliError((error as Error).message, EXIT.USAGE, undefined, 'BAD_MAP');
  }
  const stored = readJson<Credentials>(credentialsFile())?.profiles?.[session.ctx.profile]?.agents ?? {};
  const tokens = new Map<string, string>(Object.entries(stored));
  if (session.ctx.agent && session.ctx.token) tokens.set(session.ctx.agent, session.ctx.token);
  const summary = {
    posted: 0,
    replayed: 0,
    skipped_no_token: 0,
    skipped_unmapped: 0,
    malformed: 0,
    refused: [] as Refusal[],
  };
  for (const { alias, file } of logFiles(dir)) {
    const { records, skipped } = readLog(readFileSync(file, 'utf8'));
    summary.malformed += skipped.length;
    for (const s of skipped) session.print.note(`roost samp: ${file}:${s.line} skipped (${s.error})`);
    for (const record of records) {
      if (record.from !== alias) {
        // One writer per file: a record claiming another author is not this file's to import.
        summary.malformed++;
        continue;
      }
      const from = aliases.handle(record.from);
      const to = aliases.handle(record.to);
      if (!from || !to) {
        summary.skipped_unmapped++;
        continue;
      }
      const token = tokens.get(from);
      if (!token) {
        summary.skipped_no_token++;
        continue;
      }
      const client = new RoostClient({ url: session.url(), token, userAgent: USER_AGENT });
      const envelope = recordEnvelope(record, from, to);
      const original = importId(record, from, deterministicUlid).original;
      try {
        const before = Date.now();
        const accepted = await client.send(envelope);
        // A replay answers with the original timestamps (EXTENSIONS.md): from before this request.
        if (accepted.received_ms < before) summary.replayed++;
        else summary.posted++;
      } catch (error) {
        // A record exported from this envelope, coming home: the sender already holds that id with
        // the content Roost stored (which the SAMP rendering need not reproduce byte for byte).
        if (original && error instanceof RoostError && error.code === 'RETRY_MISMATCH') {
          summary.replayed++;
          continue;
        }
        if (error instanceof RoostError && error.kind === 'api' && error.status !== 401) {
          summary.refused.push({ file, id: record.id, code: error.code, message: error.message });
          continue;
        }
        throw error;
      }
    }
  }
  const refusals = summary.refused.length ? refusalSummary(summary.refused) : undefined;
  session.print.out(
    () =>
      `imported ${summary.posted} new, ${summary.replayed} already there; skipped ${summary.skipped_no_token} (no token for the sender), ${summary.skipped_unmapped} (unmapped alias), ${summary.malformed} malformed${refusals ? `\n${refusals.text}` : ''}`,
    summary,
  );
  if (refusals)
    throw new CliError(
      `${summary.refused.length} record(s) refused by the operator`,
      EXIT.REJECTED,
      refusals.hint,
      'REFUSED',
    );
}

/** SAMP records of one envelope: one per recipient (SAMP has a single `to`). */
export function envelopeRecords(envelope: StoredEnvelope, aliases: AliasMap): SampRecord[] {
  const ts = Math.floor(envelope.date_ms / 1000);
  const from = aliases.alias(envelope.from);
  const body = envelope.content_parts.map(partText).join('\n\n');
  return [...new Set([...envelope.to, ...(envelope.cc ?? [])])].map((handle) => {
    const to = aliases.alias(handle);
    const thread = envelope.subject && envelope.subject !== '' ? envelope.subject : deriveThread(from, ts, body);
    return {
      id: sampId({ ts, from, to, thread, body }),
      ts,
      from,
      to,
      thread,
      body,
      asmtp_id: envelope.id,
      asmtp_from: envelope.from,
    };
  });
}

/** Append the agent's mailbox (sent and received) to `log-<writer>.jsonl` files; records already there are skipped. */
export async function exportDir(session: Session, dir: string, options: { map?: string[] }): Promise<void> {
  const client = session.client();
  const aliases = new AliasMap(options.map ?? []);
  const ids: string[] = [];
  for await (const header of client.headers({ direction: 'both', order: 'asc', limit: 1000 })) ids.push(header.id);
  mkdirSync(dir, { recursive: true });
  const existing = new Map<string, Set<string>>();
  const present = (file: string) => {
    let set = existing.get(file);
    if (!set) {
      set = new Set(existsSync(file) ? readLog(readFileSync(file, 'utf8')).records.map((r) => r.id) : []);
      existing.set(file, set);
    }
    return set;
  };
  let written = 0;
  // Sender-only fetches mark nothing read; received ones are marked read by the fetch (ASMTP §5).
  const envelopes = await client.messages(ids);
  for (const envelope of envelopes) {
    for (const record of envelopeRecords(envelope, aliases)) {
      const file = join(dir, `log-${record.from}.jsonl`);
      const ids = present(file);
      if (ids.has(record.id)) continue;
      const line = {
        id: record.id,
        ts: record.ts,
        from: record.from,
        to: record.to,
        thread: record.thread,
        body: record.body,
        asmtp_id: record.asmtp_id,
        asmtp_from: record.asmtp_from,
      };
      appendFileSync(file, `${JSON.stringify(line)}\n`);
      ids.add(record.id);
      written++;
    }
  }
  session.print.out(() => `exported ${written} record(s) from ${envelopes.length} envelope(s) to ${dir}`, {
    written,
    envelopes: envelopes.length,
    dir,
  });
}
