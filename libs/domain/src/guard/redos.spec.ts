import { scanContent } from './guard';

/**
 * A guard against catastrophic backtracking, not a benchmark (bench/guard.ts measures speed): a
 * pattern that goes quadratic takes 16× as long on 4× the input, a linear one about 4×. Each case
 * compares the input at 512 KiB with the same input at 128 KiB, so the bound holds on any machine,
 * however fast or loaded; a wall-clock bound failed on a slow one while the scan was linear.
 */
const KiB = 1024;
const options = { largeBytes: 16 * 1024 };
/** Linear is ~4 for 4× the input; quadratic ~16. Leaves room for GC and timer noise. */
const MAX_GROWTH = 10;

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

const fill = (unit: string, length: number): string => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
/** Flat copies: a repeated string is a rope, and flattening it is not the guard's cost. */
const flat = (value: string): string => Buffer.from(value, 'utf8').toString('utf8');

/** The fastest of three scans of `text` as subject, text part and data part, in ms. */
const millisToScan = (text: string): number => {
  let best = Infinity;
  for (let run = 0; run < 3; run += 1) {
    const started = process.hrtime.bigint();
    scanContent(
      {
        subject: text.slice(0, 200),
        parts: [
          { type: 'text', text },
          { type: 'data', data: { v: text } },
        ],
      },
      options,
    );
    best = Math.min(best, Number(process.hrtime.bigint() - started) / 1e6);
  }
  return best;
};

/**
 * How much longer the scan of `make(4n)` takes than that of `make(n)`: the smallest ratio of up to
 * six measurements, stopping at the first under the bound. A busy machine can stall one scan and
 * inflate one ratio; a quadratic scan is ~16× on every measurement, so the smallest still exposes
 * it. (Three were not enough under CI's parallel suites: a linear case once measured 10.5× three
 * times running; it is ~4× on a quiet machine, with single spikes to 7–8×.)
 */
const growth = (make: (length: number) => string, n: number): number => {
  const small = flat(make(n));
  const large = flat(make(4 * n));
  let best = Infinity;
  for (let attempt = 0; attempt < 6 && best >= MAX_GROWTH; attempt += 1)
    best = Math.min(best, millisToScan(large) / millisToScan(small));
  return best;
};

describe('adversarial input scans in linear time', () => {
  // Compile and warm every pattern first, so the first case does not pay for it.
  beforeAll(() => millisToScan('rm -rf / DROP TABLE x; send me your password --context prod deploy'));

  it.each<[string, (length: number) => string]>([
    ['a run of one letter', (n) => 'a'.repeat(n)],
    ['a run of dashes', (n) => '-'.repeat(n)],
    ['base64 noise', (n) => noise(n, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-')],
  ])('%s: 4× the input takes under 10× the time', (_name, make) => {
    expect(growth(make, 128 * KiB)).toBeLessThan(MAX_GROWTH);
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
  ])('%j repeated: 4× the input takes under 10× the time', (unit) => {
    expect(growth((n) => fill(unit, n), 128 * KiB)).toBeLessThan(MAX_GROWTH);
  });
});

describe('typical envelopes', () => {
  const prose =
    'The quarterly numbers look good; the team shipped the new onboarding flow and the product page. ' +
    'Please review the draft and send me your comments by Friday. ';

  it('prose scans in linear time: 16 KiB takes under 2.5× per character what 1 KiB does', () => {
    const input = (size: number) => ({
      subject: 'weekly update',
      parts: [{ type: 'text', text: flat(fill(prose, size)) }],
    });
    const small = input(KiB);
    const large = input(16 * KiB);
    const nanos = (envelope: ReturnType<typeof input>) => {
      const started = process.hrtime.bigint();
      for (let i = 0; i < 40; i += 1) scanContent(envelope, options);
      return Number(process.hrtime.bigint() - started);
    };
    for (let i = 0; i < 20; i += 1) {
      scanContent(small, options);
      scanContent(large, options);
    }
    // The two sizes alternate round by round, so that a machine whose speed drifts over seconds
    // slows both alike; the best round of each; and the smallest of up to three such ratios (a
    // linear scan read 2.78 once on a loaded CI machine when the sizes ran one after the other;
    // a quadratic one reads ~16 every time).
    const ratio = () => {
      let bestSmall = Infinity;
      let bestLarge = Infinity;
      for (let round = 0; round < 5; round += 1) {
        bestSmall = Math.min(bestSmall, nanos(small));
        bestLarge = Math.min(bestLarge, nanos(large));
      }
      return bestLarge / (16 * KiB) / (bestSmall / KiB);
    };
    let smallest = ratio();
    for (let attempt = 1; attempt < 3 && smallest >= 2.5; attempt += 1) smallest = Math.min(smallest, ratio());
    // Per-character cost falls with size (fixed costs spread out); superlinear scanning raises it.
    expect(smallest).toBeLessThan(2.5);
  });
});
