import { isHeader, Listener, MemoryCursorStore, ORIGIN, RoostError, type Cursor } from '#client';

/**
 * What `wait_for_mail` blocks on: the push path, never polling. An implementation resolves `true`
 * once a header after `after` (null: the start of the mailbox) may be in the agent's `in` feed and
 * `false` at the timeout or on `signal`; it never misses a header committed while it waits.
 */
export interface MailWatch {
  wait(after: Cursor | null, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
}

/**
 * Over the gateway's WebSocket (`roost mcp`): a listener that resumes from `after`, so the operator
 * replays every header after it and then pushes live ones; the first header wakes the waiter.
 * Against a plain ASMTP operator the listener catches up over REST instead, still without a gap.
 */
export class ListenerMailWatch implements MailWatch {
  constructor(private readonly options: { url: string; token: string; userAgent?: string }) {}

  async wait(after: Cursor | null, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted || timeoutMs <= 0) return false;
    let wake!: (woke: boolean) => void;
    const woken = new Promise<boolean>((resolve) => (wake = resolve));
    const listener = new Listener({
      url: this.options.url,
      token: this.options.token,
      userAgent: this.options.userAgent,
      cursor: new MemoryCursorStore(after ?? ORIGIN),
      onFrame: (frame) => {
        if (isHeader(frame as unknown as Record<string, unknown>)) wake(true);
      },
    });
    const timer = setTimeout(() => wake(false), timeoutMs);
    const onAbort = () => wake(false);
    signal?.addEventListener('abort', onAbort, { once: true });
    listener.start();
    try {
      const outcome = await Promise.race([woken, listener.done]);
      if (outcome === 'unauthorized' || outcome === 'revoked') {
        throw new RoostError(
          'api',
          outcome === 'revoked' ? 'token revoked' : 'the token was refused',
          401,
          'UNAUTHORIZED',
        );
      }
      return outcome === true;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      await listener.stop();
    }
  }
}
