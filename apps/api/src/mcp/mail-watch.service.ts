import { Injectable } from '@nestjs/common';
import { FrameBus, type FrameSubscriber, type HeaderFrame } from '#bus';
import { MailboxRepository } from '#db';
import type { Cursor } from '#domain';
import type { MailWatch } from '#mcp';

interface Waiter {
  mailboxId: number;
  wake(): void;
}

/**
 * `wait_for_mail` on an api node: woken by the frame bus (Redis Streams, or in process), never by
 * polling. A waiter holds its mailbox on the bus first and only then checks Postgres for a header
 * after its cursor, so a commit lands either in that check or as a frame; a bus resync (frames may
 * be lost) wakes every waiter to check again.
 */
@Injectable()
export class MailWatchService implements FrameSubscriber {
  private readonly waiters = new Map<number, Set<Waiter>>();
  private subscribed = false;

  constructor(
    private readonly bus: FrameBus,
    private readonly mailbox: MailboxRepository,
  ) {}

  /** The watch of one agent's mailbox. */
  for(mailboxId: number): MailWatch {
    return { wait: (after, timeoutMs, signal) => this.wait(mailboxId, after, timeoutMs, signal) };
  }

  async wait(mailboxId: number, after: Cursor | null, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (timeoutMs <= 0 || signal?.aborted) return false;
    if (!this.subscribed) {
      this.subscribed = true; // lazily: an api node that never serves wait_for_mail reads no stream
      this.bus.subscribe(this);
    }
    let woken = false;
    let resolve: ((woke: boolean) => void) | undefined;
    const waiter: Waiter = {
      mailboxId,
      wake: () => {
        woken = true;
        resolve?.(true);
      },
    };
    let set = this.waiters.get(mailboxId);
    if (!set) this.waiters.set(mailboxId, (set = new Set()));
    set.add(waiter);
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => resolve?.(false);
    try {
      await this.bus.hold(mailboxId);
      if (woken) return true;
      const [first] = await this.mailbox.listIn(mailboxId, { order: 'asc', limit: 1, after: after ?? undefined });
      if (first !== undefined || woken) return true;
      return await new Promise<boolean>((done) => {
        resolve = done;
        timer = setTimeout(() => done(false), timeoutMs);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      set.delete(waiter);
      if (set.size === 0) this.waiters.delete(mailboxId);
      this.bus.release(mailboxId);
    }
  }

  /** Waiting requests right now (a gauge would read it). */
  get waiting(): number {
    let count = 0;
    for (const set of this.waiters.values()) count += set.size;
    return count;
  }

  onFrame(frame: HeaderFrame): void {
    for (const waiter of this.waiters.get(frame.mailbox_id) ?? []) waiter.wake();
  }

  onMonitor(): void {}

  onControl(): void {}

  onResync(): void {
    for (const set of this.waiters.values()) for (const waiter of set) waiter.wake();
  }
}
