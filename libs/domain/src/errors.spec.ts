import { AsmtpError, isUnavailable } from './errors';

/** What an outage throws must map to 503, what a bug throws to 500 (errors.filter.ts). */
describe('isUnavailable', () => {
  const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

  it.each([
    ['a reset socket', withCode('read ECONNRESET', 'ECONNRESET')],
    ['a refused connect', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a broken pipe', withCode('write EPIPE', 'EPIPE')],
    ['pg: the server went away', new Error('Connection terminated unexpectedly')],
    ['pg: query_timeout (a partition stalls the socket)', new Error('Query read timeout')],
    ['pg: a connect that stalled', new Error('timeout expired')],
    ['pg: a query on a closed client', new Error('Client was closed and is not queryable')],
    ['pg-pool: no client in time', new Error('timeout exceeded when trying to connect')],
    [
      'pg-pool: a wrapped connect timeout',
      new Error('Connection terminated due to connection timeout', { cause: new Error('timeout expired') }),
    ],
    ['a statement timeout', withCode('canceling statement due to statement timeout', '57014')],
    ['an admin shutdown', withCode('terminating connection due to administrator command', '57P01')],
    ['a connection exception', withCode('connection failure', '08006')],
    [
      'an AggregateError of connect attempts',
      new AggregateError([withCode('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], 'connect failed'),
    ],
    ['a wrapper of a reset', new Error('flush failed', { cause: withCode('read ECONNRESET', 'ECONNRESET') })],
    ['a 503 already', new AsmtpError(503, 'UNAVAILABLE', 'down')],
  ])('%s → unavailable', (_what, error) => {
    expect(isUnavailable(error)).toBe(true);
  });

  it.each([
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['a unique violation', withCode('duplicate key value violates unique constraint', '23505')],
    ['a syntax error', withCode('syntax error at or near "selec"', '42601')],
    ['a 400', new AsmtpError(400, 'INVALID_REQUEST', 'bad')],
    ['a message merely containing "timeout expired"', new Error('the schedule timeout expired twice')],
    ['not an object', 'ECONNRESET'],
    ['null', null],
  ])('%s → not unavailable', (_what, error) => {
    expect(isUnavailable(error)).toBe(false);
  });
});
