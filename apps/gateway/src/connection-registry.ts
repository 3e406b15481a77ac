import type { Connection } from './connection';

/** The open sockets of one gateway, by mailbox. */
export class ConnectionRegistry {
  private readonly byMailbox = new Map<number, Set<Connection>>();

  add(connection: Connection): void {
    let connections = this.byMailbox.get(connection.mailboxId);
    if (!connections) this.byMailbox.set(connection.mailboxId, (connections = new Set()));
    connections.add(connection);
  }

  /** False when it was not registered (already removed). */
  remove(connection: Connection): boolean {
    const connections = this.byMailbox.get(connection.mailboxId);
    if (!connections?.delete(connection)) return false;
    if (connections.size === 0) this.byMailbox.delete(connection.mailboxId);
    return true;
  }

  of(mailboxId: number): Iterable<Connection> {
    return this.byMailbox.get(mailboxId) ?? [];
  }

  /** The mailboxes with at least one socket here. */
  mailboxIds(): number[] {
    return [...this.byMailbox.keys()];
  }

  *all(): Iterable<Connection> {
    for (const connections of this.byMailbox.values()) yield* connections;
  }

  get size(): number {
    let count = 0;
    for (const connections of this.byMailbox.values()) count += connections.size;
    return count;
  }

  get mailboxCount(): number {
    return this.byMailbox.size;
  }
}
