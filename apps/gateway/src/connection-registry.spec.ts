import { FakeSocket } from '../../../test/support/fake-socket';
import { Connection } from './connection';
import { ConnectionRegistry } from './connection-registry';

const socketOf = (mailboxId: number) => new Connection(new FakeSocket().ws, mailboxId, `hash-${mailboxId}`);

describe('ConnectionRegistry', () => {
  it('holds sockets by mailbox and forgets a mailbox with its last socket', () => {
    const registry = new ConnectionRegistry();
    const [a1, a2, b] = [socketOf(1), socketOf(1), socketOf(2)];
    for (const connection of [a1, a2, b]) registry.add(connection);
    expect([registry.size, registry.mailboxCount]).toEqual([3, 2]);
    expect([...registry.of(1)]).toEqual([a1, a2]);
    expect(registry.mailboxIds()).toEqual([1, 2]);
    expect([...registry.all()]).toEqual([a1, a2, b]);

    expect(registry.remove(a1)).toBe(true);
    expect(registry.remove(a1)).toBe(false); // a second close event changes nothing
    expect(registry.remove(a2)).toBe(true);
    expect(registry.mailboxIds()).toEqual([2]);
    expect([...registry.of(1)]).toEqual([]);
    expect([registry.size, registry.mailboxCount]).toEqual([1, 1]);
  });
});
