import type { Fault } from './faults';
import { faultFigures, faultTable, isReset, outcome, postgresOutages } from './figures';
import type { Attempt, Send } from './load';

const T = 1_000_000;
let n = 0;
function send(attempts: Array<Partial<Attempt> & { at: number }>, to = ['@chaos.inbox1']): Send {
  const full = attempts.map((a) => ({ api: 0, status: 202, ms: 50, ...a }));
  const ok = full.findIndex((a) => a.status === 202);
  return {
    id: `E${n++}`,
    sender: '@chaos.sender1',
    to,
    cc: [],
    attempts: full,
    ...(ok >= 0
      ? { accepted: { created_at: 0, received_ms: 0, recipients: to, at: full[ok].at + full[ok].ms, attempt: ok } }
      : {}),
    done: true,
    burst: false,
  };
}
const base = {
  apiNames: ['api-0', 'api-1'],
  lostIds: new Set<string>(),
  duplicateIds: new Set<string>(),
  startedAt: T - 10_000,
  now: T + 100_000,
};

test('resets are told apart from refusals, timeouts and HTTP failures', () => {
  expect(outcome({ status: 503 })).toBe('503');
  expect(outcome({ status: 0, code: 'ECONNRESET' })).toBe('reset');
  expect(outcome({ status: 0, code: 'UND_ERR_SOCKET' })).toBe('reset');
  expect(outcome({ status: 0, code: 'ECONNREFUSED' })).toBe('refused');
  expect(outcome({ status: 0, code: 'TimeoutError' })).toBe('timeout');
  expect(isReset({ status: 503, code: 'ECONNRESET' })).toBe(false);
});

test('a fault counts the requests started while it was on, by status, and its recovery', () => {
  const fault: Fault = {
    kind: 'outage-api',
    target: 'api-0+api-1',
    at: T,
    downMs: 20_000,
    healedAt: T + 20_000,
    upAt: T + 22_000,
  };
  const sends = [
    send([{ at: T - 500 }]), // before: not counted
    send([
      { at: T + 100, status: 0, code: 'ECONNRESET' },
      { at: T + 1_000, status: 0, code: 'ECONNREFUSED' },
      { at: T + 23_500, status: 202, ms: 100 },
    ]),
    send([{ at: T + 22_500, status: 503 }, { at: T + 24_000 }]),
    send([{ at: T + 40_000 }]), // after the window
  ];
  const { each, byKind, failures } = faultFigures({ ...base, faults: [fault], sends });
  expect(failures).toEqual([]);
  expect(each[0]).toMatchObject({
    requests: 3,
    failed: { reset: 1, refused: 1, '503': 1 },
    resets: 1,
    lost: 0,
    duplicates: 0,
  });
  // Up at +22 s, but the first 202 after the heal (+20 s) was answered at +23.6 s.
  expect(each[0].recovery_s).toBe(3.6);
  expect(byKind).toEqual([expect.objectContaining({ kind: 'outage-api', count: 1, resets: 1, recovery_s_max: 3.6 })]);
  expect(faultTable(byKind).join('\n')).toContain('| outage-api');
});

test('a 202 given during a fault that is lost or duplicated is charged to it, and fails the run', () => {
  const fault: Fault = {
    kind: 'partition-postgres',
    target: 'postgres',
    at: T,
    downMs: 5_000,
    healedAt: T + 5_000,
    upAt: T + 5_000,
    mode: 'cut',
  };
  const lost = send([{ at: T + 1_000 }]);
  const dup = send([{ at: T + 2_000 }]);
  const after = send([{ at: T + 6_000 }]);
  const { each, failures } = faultFigures({
    ...base,
    faults: [fault],
    sends: [lost, dup, after],
    lostIds: new Set([lost.id]),
    duplicateIds: new Set([dup.id]),
  });
  expect(each[0]).toMatchObject({ lost: 1, duplicates: 1, mode: 'cut' });
  expect(failures).toEqual([
    expect.stringContaining('1 envelopes answered 202 meanwhile were lost'),
    expect.stringContaining('were duplicated'),
  ]);
});

test('a fault with no 202 after it ended never recovered', () => {
  const fault: Fault = {
    kind: 'slow-redis',
    target: 'redis',
    at: T,
    downMs: 5_000,
    healedAt: T + 5_000,
    upAt: T + 5_000,
  };
  const { each, failures } = faultFigures({
    ...base,
    faults: [fault],
    sends: [send([{ at: T + 1_000, status: 503 }])],
  });
  expect(each[0].recovery_s).toBeNull();
  expect(failures).toEqual([expect.stringContaining('never recovered')]);
});

test('SIGTERM: a reset of a request to the draining api, or a drain cut short by SIGKILL, fails', () => {
  const drained: Fault = {
    kind: 'sigterm',
    target: 'api-1',
    at: T,
    downMs: 1_000,
    drain: { code: 0, signal: null, ms: 800 },
    healedAt: T + 1_800,
    upAt: T + 3_000,
  };
  const clean = [
    send([
      { at: T + 100, api: 1, status: 503 },
      { at: T + 700, api: 0 },
    ]),
    send([{ at: T + 3_500, api: 1 }]),
  ];
  expect(faultFigures({ ...base, faults: [drained], sends: clean }).failures).toEqual([]);
  // A reset on the other api (not draining) is counted but is not a drain failure.
  const elsewhere = [
    ...clean,
    send([
      { at: T + 200, api: 0, status: 0, code: 'ECONNRESET' },
      { at: T + 900, api: 0 },
    ]),
  ];
  const other = faultFigures({ ...base, faults: [drained], sends: elsewhere });
  expect(other.failures).toEqual([]);
  expect(other.each[0].resets).toBe(1);
  const cut = [
    ...clean,
    send([
      { at: T + 200, api: 1, status: 0, code: 'UND_ERR_SOCKET' },
      { at: T + 900, api: 0 },
    ]),
  ];
  expect(faultFigures({ ...base, faults: [drained], sends: cut }).failures).toEqual([
    expect.stringContaining('1 in-flight requests to the draining node were reset'),
  ]);
  const killed: Fault = { ...drained, drain: { code: null, signal: 'SIGKILL', ms: 5_000 } };
  expect(faultFigures({ ...base, faults: [killed], sends: clean }).failures).toEqual([
    expect.stringContaining('the drain did not end by itself (exit SIGKILL'),
  ]);
});

test('a locked mailbox: only sends to it count; they may wait or get 503, anything else fails', () => {
  const fault: Fault = {
    kind: 'lock-mailbox',
    target: '@chaos.inbox2',
    at: T,
    downMs: 6_000,
    healedAt: T + 6_000,
    upAt: T + 6_000,
  };
  const sends = [
    send([{ at: T + 100, status: 503, ms: 5_000 }, { at: T + 6_500 }], ['@chaos.inbox2']),
    send([{ at: T + 200, status: 500 }], ['@chaos.inbox1']), // another mailbox: not this fault's
  ];
  const ok = faultFigures({ ...base, faults: [fault], sends });
  expect(ok.each[0]).toMatchObject({ requests: 2, failed: { '503': 1 }, max_wait_ms: 5_000, recovery_s: 0.6 });
  expect(ok.failures).toEqual([]);
  const bad = faultFigures({
    ...base,
    faults: [fault],
    sends: [...sends, send([{ at: T + 300, status: 500 }, { at: T + 7_000 }], ['@chaos.inbox2'])],
  });
  expect(bad.failures).toEqual([expect.stringContaining('answered 500×1 (only 202 or 503 expected)')]);
  // Refused by an api another fault had down meanwhile: that fault's, not the lock's.
  const refused = send(
    [{ at: T + 400, status: 0, code: 'ECONNREFUSED', api: 1 }, { at: T + 7_000 }],
    ['@chaos.inbox2'],
  );
  const killed: Fault = {
    kind: 'kill-api',
    target: 'api-1',
    at: T + 300,
    downMs: 1_000,
    healedAt: T + 1_300,
    upAt: T + 2_000,
  };
  expect(faultFigures({ ...base, faults: [fault, killed], sends: [...sends, refused] }).failures).toEqual([]);
  // Waiting behind the lock when its api was killed -9: reset by the kill, not by the lock.
  const inFlight = send(
    [{ at: T + 100, status: 0, code: 'ECONNRESET', api: 1, ms: 250 }, { at: T + 7_000 }],
    ['@chaos.inbox2'],
  );
  expect(faultFigures({ ...base, faults: [fault, killed], sends: [...sends, inFlight] }).failures).toEqual([]);
  // The same reset ending before the kill is the lock's.
  const before = send(
    [{ at: T + 100, status: 0, code: 'ECONNRESET', api: 1, ms: 150 }, { at: T + 7_000 }],
    ['@chaos.inbox2'],
  );
  expect(faultFigures({ ...base, faults: [fault, killed], sends: [...sends, before] }).failures).toEqual([
    expect.stringContaining('answered reset×1'),
  ]);
  expect(faultFigures({ ...base, faults: [fault], sends: [...sends, refused] }).failures).toEqual([
    expect.stringContaining('answered refused×1'),
  ]);
});

test('a Postgres restart hidden by a blackhole partition is a masked outage; a cut or none leaves it visible', () => {
  const restart: Fault = { kind: 'restart-postgres', target: 'postgres', at: T, downMs: 4_000, upAt: T + 5_000 };
  const blackhole: Fault = {
    kind: 'partition-postgres',
    target: 'postgres',
    at: T - 3_000,
    downMs: 10_000,
    mode: 'blackhole',
    healedAt: T + 7_000,
  };
  expect(postgresOutages([restart], T + 9_000)).toEqual([{ start: T, end: T + 5_000, masked: false }]);
  expect(postgresOutages([blackhole, restart], T + 9_000)).toEqual([{ start: T, end: T + 5_000, masked: true }]);
  // A cut refuses new connections: the crash stays visible. A blackhole over before the crash, too.
  expect(postgresOutages([{ ...blackhole, mode: 'cut' }, restart], T + 9_000)[0].masked).toBe(false);
  expect(postgresOutages([{ ...blackhole, healedAt: T - 1 }, restart], T + 9_000)[0].masked).toBe(false);
  // Still on: masked until now.
  expect(postgresOutages([{ ...blackhole, healedAt: undefined }, restart], T + 9_000)[0].masked).toBe(true);
});
