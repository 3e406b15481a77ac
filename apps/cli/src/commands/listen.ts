import { join } from 'node:path';
import { Listener, type ListenerEnd } from '../../../../libs/client/src/listener';
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
 * One JSON line per frame on stdout (headers from replay, catch-up and live push; monitor facts;
 * `cursor.expired`), diagnostics on stderr. Ctrl-C saves the cursor and exits 0.
 */
export async function listen(session: Session, options: ListenOptions): Promise<void> {
  const handle = session.requireAgent();
  const token = session.requireToken();
  const file = options.cursor ?? cursorFile(session, handle);
  const note = (text: string) => process.stderr.write(`roost listen: ${text}\n`);
  const listener = new Listener({
    url: session.ctx.url,
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
          return note(event.supported ? `resumed from the cursor (${event.replayed ?? 0} replayed)` : 'operator does not resume: catching up over REST');
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
  if (end === 'revoked') throw new CliError('the operator closed the socket: token revoked (4001)', EXIT.REVOKED, `get a new token with \`roost admin agent rotate-token ${handle}\``, 'REVOKED');
  if (end === 'unauthorized') throw new CliError(`the operator refused the token of ${handle}`, EXIT.UNAUTHORIZED, `rotate it with \`roost admin agent rotate-token ${handle}\`, or pass --token`, 'UNAUTHORIZED');
  throw new CliError(`gave up after ${options.maxAttempts} failed attempts`, EXIT.UNREACHABLE, 'is the operator running? check with `roost doctor`', 'GAVE_UP');
}
