import { scanContent } from './guard';

/**
 * A coarse guard against catastrophic backtracking, not a benchmark: a pattern that goes
 * quadratic on 1 MiB takes seconds to minutes, so these bounds only catch that class of bug.
 */
const MiB = 1 << 20;
const options = { largeBytes: 16 * 1024 };

/** Deterministic base64-ish noise (no Math.random: a failure must reproduce). */
function noise(length: number, alphabet: string): string {
  let state = 0x9e3779b9;
  const out: string[] = [];
  for (let i = 0; i < length; i += 1) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out.push(alphabet[(state >>> 0) % alphabet.length]);
  }
  return out.join('');
}

const fill = (unit: string): string => unit.repeat(Math.ceil(MiB / unit.length)).slice(0, MiB);
/** Flat copies: a repeated string is a rope, and flattening it is not the guard's cost. */
const flat = (value: string): string => Buffer.from(value, 'utf8').toString('utf8');

const millisToScan = (text: string): number => {
  const started = process.hrtime.bigint();
  scanContent({ subject: text.slice(0, 200), parts: [{ type: 'text', text }, { type: 'data', data: { v: text } }] }, options);
  return Number(process.hrtime.bigint() - started) / 1e6;
};

describe('1 MiB adversarial input scans in bounded time', () => {
  // Compile and warm every pattern first, so the first case does not pay for it.
  beforeAll(() => millisToScan('rm -rf / DROP TABLE x; send me your password --context prod deploy'));

  it.each([
    ['a'.repeat(MiB)],
    ['-'.repeat(MiB)],
    [noise(MiB, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-')],
  ])('%# plain runs and base64 noise: under 200 ms', (text) => {
    expect(millisToScan(flat(text))).toBeLessThan(200);
  });

  // Prefix-dense inputs: every position could start a match, so these catch a regex that
  // rescans the rest of the run from each start.
  it.each([
    ['eyJ'],
    ['sk-'],
    ['github_pat_'],
    ['xoxb-1-'],
    ['prod '],
    ['prod\n\n'],
    ['rm -r '],
    ['password=Ab1'],
    ['send me your '],
    ['a://b:'],
    ['drop table '],
    ['DELETE FROM x '],
    ['git push '],
    ['kubectl '],
    ['-----BEGIN PRIVATE KEY-----'],
    ['chmod -R -R '],
  ])('%j repeated: under 1 s', (unit) => {
    expect(millisToScan(flat(fill(unit)))).toBeLessThan(1000);
  });
});

describe('typical envelopes', () => {
  const prose =
    'The quarterly numbers look good; the team shipped the new onboarding flow and the product page. ' +
    'Please review the draft and send me your comments by Friday. ';

  it.each([[1024], [16 * 1024]])('%d characters of prose scan in well under 1 ms on average', (size) => {
    const input = { subject: 'weekly update', parts: [{ type: 'text', text: flat(fill(prose).slice(0, size)) }] };
    for (let i = 0; i < 20; i += 1) scanContent(input, options);
    const runs = 200;
    const started = process.hrtime.bigint();
    for (let i = 0; i < runs; i += 1) scanContent(input, options);
    const micros = Number(process.hrtime.bigint() - started) / 1e3 / runs;
    // Loose on purpose (shared CI machines); measured figures are in the closing note.
    expect(micros).toBeLessThan(size <= 1024 ? 500 : 2000);
  });
});
