import { Writable } from 'node:stream';
import { loadConfig } from '#config';
import { accessLogger, createLogger, REDACT_PATHS } from './logging';

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
