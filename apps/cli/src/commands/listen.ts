import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { FileCursorStore, Listener, ORIGIN, type Cursor, type ListenerEnd, type RoostClient } from '#client';
import { CliError, EXIT } from '../output';
import { USER_AGENT, type Session } from '../session';

export interface ListenOptions {
  resume?: boolean;
  catchUp?: boolean;
  cursor?: string;
  maxAttempts?: string;
}

/** `<stateDir>/cursors/<profile>/<owner>.<name>.json`. */
export function cursorFile(session: Session, handle: string): string {
  return join(session.ctx.stateDir, 'cursors', session.ctx.profile, `${handle.replace(/^@/, '')}.json`);
}

/**
 * The first `listen` of an agent (no cursor file yet) starts at its unread mail, not at the origin:
 * the cursor goes just before the oldest unread envelope, and the read envelopes after it are
 * marked seen (up to 1,000, the cursor file's dedup bound), so nothing already read is replayed.
 * With no unread mail it starts at the newest envelope. Returns how many were skipped as read.
 */
export async function seedCursor(
  client: RoostClient,
  file: string,
): Promise<{ cursor: Cursor | null; skipped: number }> {
  const store = new FileCursorStore(file);
  const oldestUnread = (await client.mailbox({ unread: true, order: 'asc', limit: 1 })).envelope_headers[0];
  if (!oldestUnread) {
    const newest = (await client.mailbox({ order: 'desc', limit: 1 })).envelope_headers[0];
    const cursor = newest ? { created_at: newest.created_at, envelope_id: newest.id } : null;
    store.save({ cursor, recent: new Map() });
    return { cursor, skipped: 0 };
  }
  const before = (
    await client.mailbox({
      order: 'desc',
      limit: 1,
      after: { created_at: oldestUnread.created_at, envelope_id: oldestUnread.id },
    })
  ).envelope_headers[0];
  const cursor = before ? { created_at: before.created_at, envelope_id: before.id } : ORIGIN;
  const read = (await client.mailbox({ unread: false, order: 'asc', limit: 1000, after: cursor })).envelope_headers;
  store.save({ cursor, recent: new Map(read.map((h) => [h.id, h.created_at])) });
  return { cursor, skipped: read.length };
}

/**
 * One JSON line per frame on stdout (headers from replay, catch-up and live push; monitor facts;
 * `cursor.expired`), diagnostics on stderr. Ctrl-C saves the cursor and exits 0.
 */
export async function listen(session: Session, options: ListenOptions): Promise<void> {
  const handle = session.requireAgent();
  const token = session.requireToken();
  const file = options.cursor ?? cursorFile(session, handle);
  const note = (text: string) => process.stderr.write(`roost listen: ${text}\n`);
  if (!existsSync(file) && options.catchUp !== false) {
    const { skipped } = await seedCursor(session.client(), file);
    note(`first run: starting at the unread mail${skipped ? ` (${skipped} already read skipped)` : ''}`);
  }
  const listener = new Listener({
    url: session.url(),
    token,
    cursor: file,
    resume: options.resume !== false,
    catchUp: options.catchUp !== false,
    maxAttempts: options.maxAttempts ? Number(options.maxAttempts) : undefined,
    userAgent: USER_AGENT,
    onFrame(frame) {
      process.stdout.write(`${JSON.stringify(frame)}\n`);
    },
    onEvent(event) {
      switch (event.type) {
        case 'open':
          return note(`connected to ${session.ctx.url} as ${handle}`);
        case 'close':
          return note(`closed ${event.code}${event.reason ? ` (${event.reason})` : ''}`);
        case 'rejected':
          return note(`handshake refused with HTTP ${event.status}`);
        case 'retry':
          return note(`reconnecting in ${event.delayMs} ms (${event.failures} failed in a row)`);
        case 'resume':
          return note(
            event.supported
              ? `resumed from the cursor (${event.replayed ?? 0} replayed)`
              : 'operator does not resume: catching up over REST',
          );
        case 'catchup':
          return note(`caught up: ${event.delivered} header(s) in ${event.pages} page(s)`);
        case 'dropped':
          return note(`dropped a frame (${event.reason})`);
        case 'error':
          return note(event.message);
        default:
          return undefined;
      }
    },
  });
  const stop = () => void listener.stop();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  listener.start();
  const end: ListenerEnd = await listener.done;
  if (end === 'stopped') return;
  if (end === 'revoked')
    throw new CliError(
      'the operator closed the socket: token revoked (4001)',
      EXIT.REVOKED,
      `get a new token with \`roost admin agent rotate-token ${handle}\``,
      'REVOKED',
    );
  if (end === 'unauthorized')
    throw new CliError(
      `the operator refused the token of ${handle}`,
      EXIT.UNAUTHORIZED,
      `rotate it with \`roost admin agent rotate-token ${handle}\`, or pass --token`,
      'UNAUTHORIZED',
    );
  throw new CliError(
    `gave up after ${options.maxAttempts} failed attempts`,
    EXIT.UNREACHABLE,
    'is the operator running? check with `roost doctor`',
    'GAVE_UP',
  );
}
