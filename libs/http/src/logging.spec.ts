import { Writable } from 'node:stream';
import { loadConfig } from '#config';
import { accessLogger, createLogger, isoTime, REDACT_PATHS } from './logging';

/** A process logger at info writing into `lines`. */
function capture() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createLogger(loadConfig({ ROOST_LOG_LEVEL: 'info', ROOST_ROLE: 'all' }), sink);
  return { logger, lines };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('the access-line logger', () => {
  it('writes a flat line exactly as the process logger does (same base fields, same order)', async () => {
    const { logger, lines } = capture();
    const fields = {
      req_id: 'r-1',
      agent: '@a',
      envelope_id: 'e',
      method: 'POST',
      route: '/messages',
      status: 202,
      ms: 1.5,
    };
    logger.info(fields, 'request');
    accessLogger(logger).info(fields, 'request');
    await flush();
    expect(lines).toHaveLength(2);
    const [processLine, accessLine] = lines.map((line) => line.replace(/"time":"[^"]*"/, '"time":"T"'));
    expect(accessLine).toBe(processLine);
    expect(JSON.parse(lines[1])).toMatchObject({ level: 'info', role: 'all', msg: 'request', status: 202 });
  });

  it('still masks the top-level keys the process logger masks', async () => {
    const { logger, lines } = capture();
    const topLevel = REDACT_PATHS.filter((path) => !path.includes('.'));
    expect(topLevel).toEqual(['authorization', 'token', 'admin_token']);
    accessLogger(logger).info({ req_id: 'r-2', authorization: 'Bearer s1', token: 's2', admin_token: 's3' }, 'request');
    await flush();
    const line = JSON.parse(lines[0]) as Record<string, unknown>;
    expect(line).toMatchObject({ authorization: '[redacted]', token: '[redacted]', admin_token: '[redacted]' });
    expect(lines[0]).not.toMatch(/s1|s2|s3/);
  });

  it('the process logger keeps its nested paths', async () => {
    const { logger, lines } = capture();
    logger.info({ headers: { authorization: 'Bearer s4' }, ctx: { token: 's5' } }, 'x');
    await flush();
    expect(lines[0]).not.toMatch(/s4|s5/);
  });
});

describe('isoTime', () => {
  it('is toISOString for every millisecond around minute, hour, day and year boundaries', () => {
    const starts = [
      0,
      Date.UTC(2026, 11, 6, 9, 59, 59, 0),
      Date.UTC(2026, 11, 31, 23, 59, 58, 0),
      Date.UTC(2028, 1, 29, 23, 59, 0, 0),
      Date.UTC(9999, 11, 31, 23, 59, 58, 0),
    ];
    for (const start of starts)
      for (let ms = start; ms < start + 2_500; ms++) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
  });

  it('is toISOString for random times, in and out of order, and outside 1970–9999', () => {
    for (let i = 0; i < 5_000; i++) {
      const ms = Math.floor(Math.random() * Date.UTC(9999, 11, 31));
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
    for (const ms of [-1, -60_001, Date.UTC(10000, 0, 1), 1.5, Date.UTC(1969, 11, 31, 23, 59, 59, 999)])
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
  });

  it('stamps the log lines', async () => {
    const { logger, lines } = capture();
    const before = Date.now();
    logger.info('x');
    await flush();
    const time = (JSON.parse(lines[0]) as { time: string }).time;
    expect(time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Date.parse(time)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(time)).toBeLessThanOrEqual(Date.now());
  });
});
