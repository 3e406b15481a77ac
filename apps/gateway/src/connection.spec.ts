import { FakeSocket } from '../../../test/support/fake-socket';
import { Connection } from './connection';

describe('Connection starting window', () => {
  it('sends a frame committed while the socket started (seq at or below the start) once, however late', () => {
    const connection = new Connection(new FakeSocket().ws, 1, 'hash');
    connection.startAt(10);
    expect(connection.lastSeq).toBe(10);
    expect(connection.claimStartWindowFrame(9)).toBe(true);
    expect(connection.claimStartWindowFrame(9)).toBe(false); // once
    expect(connection.claimStartWindowFrame(10)).toBe(true);
  });

  it('never claims a frame past the start', () => {
    const connection = new Connection(new FakeSocket().ws, 1, 'hash');
    connection.startAt(10);
    expect(connection.claimStartWindowFrame(11)).toBe(false);
  });

  it('a resuming socket (never started plainly) has no starting window', () => {
    const connection = new Connection(new FakeSocket().ws, 1, 'hash');
    connection.lastSeq = 10; // set by the replay
    expect(connection.claimStartWindowFrame(1)).toBe(false);
    expect(connection.claimStartWindowFrame(5)).toBe(false);
  });
});
