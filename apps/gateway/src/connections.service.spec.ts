import { Logger } from '@nestjs/common';
import type { FrameBus } from '#bus';
import { loadConfig } from '#config';
import type { AgentsRepository, MailboxRepository, RetentionRepository } from '#db';
import { CLOSE_CODES } from '#domain';
import { Metrics } from '#metrics';
import { FakeSocket } from '../../../test/support/fake-socket';
import { ConnectionsService } from './connections.service';
import type { ConnectAuth } from './ws-adapter';

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A gateway over in-memory repositories: mailbox 1's entries are `entries` (seq → header). */
function gateway() {
  const entries = new Map<number, string>();
  const tokens = new Map<number, string>([[1, 'h1']]);
  let failLookup: Error | undefined;
  const held: number[] = [];
  const released: number[] = [];
  const bus = {
    hold: async (id: number) => void held.push(id),
    release: (id: number) => void released.push(id),
    subscribe: () => undefined,
  };
  const mailbox = {
    lastSeqs: async (ids: readonly number[]) => new Map(ids.map((id) => [id, Math.max(0, ...entries.keys())])),
    entriesBySeq: async (_id: number, after: number, through: number | null) =>
      [...entries]
        .filter(([seq]) => seq > after && (through === null || seq <= through))
        .sort(([a], [b]) => a - b)
        .map(([seq, header]) => ({ seq, header, created_at: seq, envelope_id: `E${seq}` })),
    seqAtOrBefore: async () => 0,
  };
  const agents = {
    tokenHashes: async (ids: readonly number[]) => {
      if (failLookup) throw failLookup;
      return new Map(ids.flatMap((id) => (tokens.has(id) ? [[id, tokens.get(id)!] as const] : [])));
    },
  };
  const retention = { mark: async () => undefined, oldestEntry: async () => undefined };
  const config = loadConfig({
    DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/unused',
    ROOST_ADMIN_TOKEN: 'admin-token-for-the-spec',
  });
  const service = new ConnectionsService(
    bus as unknown as FrameBus,
    mailbox as unknown as MailboxRepository,
    agents as unknown as AgentsRepository,
    retention as unknown as RetentionRepository,
    new Metrics(),
    config,
  );
  let clock = 100_000;
  service.now = () => clock;
  const open = async (tokenHash = 'h1', cursor?: ConnectAuth['cursor']) => {
    const socket = new FakeSocket();
    service.open(socket.ws, { agent: { id: 1 } as ConnectAuth['agent'], tokenHash, ...(cursor ? { cursor } : {}) });
    await flush();
    return socket;
  };
  const frame = (seq: number) => {
    entries.set(seq, `h${seq}`);
    return { mailbox_id: 1, seq, envelope_id: `E${seq}`, created_at: seq, header: `h${seq}` };
  };
  return {
    service,
    entries,
    tokens,
    held,
    released,
    open,
    frame,
    advance: (ms: number) => (clock += ms),
    failLookups: (error: Error) => (failLookup = error),
  };
}

describe('ConnectionsService delivery', () => {
  it('a plain socket starts at the mailbox seq, gets new frames once, and a gap is backfilled from Postgres first', async () => {
    const { service, open, frame, held } = gateway();
    frame(1);
    frame(2);
    const socket = await open();
    expect(held).toEqual([1]);
    service.onFrame(frame(3), Date.now());
    await flush();
    frame(4); // its publish was lost
    frame(5);
    service.onFrame(frame(6), Date.now());
    await flush();
    service.onFrame(frame(6), Date.now()); // a duplicate
    await flush();
    expect(socket.sent).toEqual(['h3', 'h4', 'h5', 'h6']);
  });

  it('a frame committed while the socket started is sent once, however late the bus brings it', async () => {
    const { service, open, frame, advance } = gateway();
    const early = frame(1); // committed between registration and the start read
    const late = frame(2); // also before the start read, delivered by a lagging bus much later
    const socket = await open();
    service.onFrame(early, Date.now());
    service.onFrame(early, Date.now());
    await flush();
    advance(60_000);
    service.onFrame(late, Date.now());
    service.onFrame(late, Date.now());
    await flush();
    expect(socket.sent).toEqual(['h1', 'h2']);
  });

  it('a live frame with no gap is on the socket when the bus delivery returns; a gap still waits for its backfill', async () => {
    const { service, open, frame } = gateway();
    const socket = await open();
    service.onFrame(frame(1), Date.now());
    service.onMonitor({ mailbox_id: 1, frame: 'fact' });
    expect(socket.sent).toEqual(['h1', 'fact']); // no await: sent synchronously
    frame(2); // lost
    service.onFrame(frame(3), Date.now());
    service.onFrame(frame(4), Date.now()); // behind the backfill, not before it
    expect(socket.sent).toEqual(['h1', 'fact']);
    await flush();
    expect(socket.sent).toEqual(['h1', 'fact', 'h2', 'h3', 'h4']);
    service.onFrame(frame(5), Date.now());
    expect(socket.sent).toEqual(['h1', 'fact', 'h2', 'h3', 'h4', 'h5']);
  });

  it('the next seq arriving while a backfill runs waits behind it: sent once, in order', async () => {
    const { service, open, frame } = gateway();
    const socket = await open();
    service.onFrame(frame(1), Date.now());
    const two = frame(2); // lost for now
    frame(3); // lost
    service.onFrame(frame(4), Date.now()); // backfills 2 and 3 first
    service.onFrame(two, Date.now()); // the bus brings 2 late, while that backfill runs
    await flush();
    expect(socket.sent).toEqual(['h1', 'h2', 'h3', 'h4']);
  });

  it('a monitor fact stays behind the notify frames queued before it', async () => {
    const { service, open, frame } = gateway();
    const socket = await open();
    frame(1); // lost: the next frame backfills it
    service.onFrame(frame(2), Date.now());
    service.onMonitor({ mailbox_id: 1, frame: 'fact' });
    await flush();
    expect(socket.sent).toEqual(['h1', 'h2', 'fact']);
  });

  it('a socket whose token changed before it registered is closed 4001', async () => {
    const { open, tokens } = gateway();
    tokens.set(1, 'rotated');
    const socket = await open('h1');
    expect(socket.closes).toEqual([[CLOSE_CODES.revoked, 'token revoked']]);
  });

  it('a socket that cannot start is closed 1011 and the failure logged', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const { open, failLookups } = gateway();
      failLookups(new Error('database down'));
      const socket = await open();
      expect(socket.closes).toEqual([[CLOSE_CODES.internalError, 'internal error']]);
      expect(warn).toHaveBeenCalledWith('could not start a socket: database down');
    } finally {
      warn.mockRestore();
    }
  });

  it('revoke closes 4001, shutdown closes 1012, and a closed socket is forgotten and released from the bus', async () => {
    const { service, open, released } = gateway();
    const first = await open();
    const second = await open();
    service.onControl({ kind: 'revoke', mailbox_id: 1 });
    expect(first.closes).toEqual([[CLOSE_CODES.revoked, 'token revoked']]);
    expect(service.connectionCount).toBe(2);
    first.emit('close');
    expect(service.connectionCount).toBe(1);
    expect(released).toEqual([1]);
    const third = await open();
    service.beforeApplicationShutdown();
    expect(third.closes).toEqual([[CLOSE_CODES.serviceRestart, 'service restart']]);
    expect(second.closes).toEqual([[CLOSE_CODES.revoked, 'token revoked']]); // closed once only
  });
});
