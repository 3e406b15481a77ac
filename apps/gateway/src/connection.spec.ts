import { FakeSocket } from '../../../test/support/fake-socket';
import { Connection, START_GRACE_MS } from './connection';

describe('Connection starting window', () => {
  it('sends a frame committed while the socket started (seq at or below the start) once, within the grace', () => {
    const connection = new Connection(new FakeSocket().ws, 1, 'hash');
    connection.startAt(10, 1_000);
    expect(connection.lastSeq).toBe(10);
    expect(connection.claimStartWindowFrame(9, 1_000)).toBe(true);
    expect(connection.claimStartWindowFrame(9, 1_001)).toBe(false); // once
    expect(connection.claimStartWindowFrame(10, 1_000 + START_GRACE_MS)).toBe(true);
  });

  it('never claims a frame past the start, or any after the grace', () => {
    const connection = new Connection(new FakeSocket().ws, 1, 'hash');
    connection.startAt(10, 1_000);
    expect(connection.claimStartWindowFrame(11, 1_000)).toBe(false);
    expect(connection.claimStartWindowFrame(8, 1_001 + START_GRACE_MS)).toBe(false);
  });

  it('a resuming socket (never started plainly) has no starting window', () => {
    const connection = new Connection(new FakeSocket().ws, 1, 'hash');
    connection.lastSeq = 10; // set by the replay
    expect(connection.claimStartWindowFrame(1, 1_000)).toBe(false);
    expect(connection.claimStartWindowFrame(5, 1_000)).toBe(false);
  });
});
