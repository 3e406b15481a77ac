import { CORPUS, DETECTOR_CODES, ALL_CASES } from '../../../../bench/data/guard-corpus';
import { CREDENTIAL_REQUEST_ANCHORS, detectCredentialRequest } from './credential-request';
import { DESTRUCTIVE_ANCHORS, detectDestructive } from './destructive';
import { GUARD_DETAILS, scanContent } from './guard';
import { detectProduction, PRODUCTION_ANCHORS } from './production';
import { anchorScanner, escapeRegExp, type Anchors } from './rules';
import { detectSecret, SECRET_ANCHORS } from './secret';

const findingsOf = (text: string) =>
  scanContent({ parts: [{ type: 'text', text }] }, { largeBytes: Number.MAX_SAFE_INTEGER });

describe('details are a closed set of constants', () => {
  it('every detail a detector can produce is reached by some corpus positive', () => {
    for (const code of DETECTOR_CODES) {
      const reached = new Set(
        CORPUS[code].positives.flatMap((entry) =>
          findingsOf(entry.text)
            .filter((finding) => finding.code === code)
            .map((finding) => finding.detail),
        ),
      );
      expect([...reached].sort()).toEqual([...new Set(GUARD_DETAILS[code])].sort());
    }
  });

  it('no finding over the whole corpus carries a detail outside that set', () => {
    for (const entry of ALL_CASES) {
      for (const finding of findingsOf(entry.text)) {
        if (finding.code !== 'large') expect(GUARD_DETAILS[finding.code]).toContain(finding.detail);
      }
    }
  });
});

describe('anchors', () => {
  it('finds overlapping anchors, the shorter ones a longer one starts with, in any case', () => {
    const scan = anchorScanner(['sk-', 'sk-ant-', 'env', '.env', 'drop', 'dropdatabase', 'rm']);
    expect([...scan('x .ENV; SK-ANT-1 db.dropDatabase()')].sort()).toEqual(
      ['.env', 'drop', 'dropdatabase', 'env', 'sk-', 'sk-ant-'].sort(),
    );
    expect(scan('nothing here').size).toBe(0);
  });

  it('finds exactly the anchors a case-insensitive search finds, overlapping or not', () => {
    const anchors = [
      ...new Set([...SECRET_ANCHORS, ...DESTRUCTIVE_ANCHORS, ...PRODUCTION_ANCHORS, ...CREDENTIAL_REQUEST_ANCHORS]),
    ];
    const scan = anchorScanner(anchors);
    // Pieces of anchors in both cases, characters Unicode case mapping treats specially, and filler.
    const pieces = [
      ...anchors.flatMap((anchor) => [anchor, anchor.toUpperCase(), anchor.slice(0, 2), anchor.slice(1)]),
      ...['\u212a', '\u0130', '\u0131', '\u017f', 'ß', 'é', ' ', '-', '_', '.', '/', ':', 'x', 'K', 'S'],
    ];
    let seed = 42;
    const next = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 16) % n;
    };
    for (let round = 0; round < 2_000; round++) {
      const text = Array.from({ length: 1 + next(12) }, () => pieces[next(pieces.length)]).join('');
      const expected = anchors.filter((anchor) => new RegExp(escapeRegExp(anchor), 'i').test(text));
      expect([...scan(text)].sort()).toEqual(expected.sort());
    }
    expect(() => anchorScanner(['Key'])).toThrow('anchors are lower case');
    expect(() => anchorScanner(['clé'])).toThrow('anchors are ASCII');
    expect(() => anchorScanner([''])).toThrow('never empty');
  });

  it('gating rules by anchor never changes a detector result on the corpus', () => {
    const everything = { has: () => true } as unknown as Anchors;
    for (const entry of ALL_CASES) {
      expect(detectSecret(entry.text)).toBe(detectSecret(entry.text, everything));
      expect(detectDestructive(entry.text)).toBe(detectDestructive(entry.text, everything));
      expect(detectProduction(entry.text)).toBe(detectProduction(entry.text, everything));
      expect(detectCredentialRequest(entry.text)).toBe(detectCredentialRequest(entry.text, everything));
    }
  });
});

describe('detectors called directly', () => {
  it.each([
    ['postgres://app:Zq8#pLm2-Vx7@db.internal/app', 'password in URL'],
    ['the password is stored in Vault', null],
  ])('detectSecret(%j) = %j', (text, detail) => {
    expect(detectSecret(text)).toBe(detail);
  });

  it.each([
    ['rm -rf /', 'recursive delete (rm -rf)'],
    ['rm -r build', 'recursive delete (rm -r)'],
    ['rm -f *.log', 'forced delete of a glob or root path (rm -f)'],
    ['rm -f notes.txt', null],
    ['DROP SCHEMA billing CASCADE;', 'SQL DROP SCHEMA'],
    ['the DROP SCHEMA statement', null],
  ])('detectDestructive(%j) = %j', (text, detail) => {
    expect(detectDestructive(text)).toBe(detail);
  });

  it.each([
    ['kubectl scale deploy/api --replicas=0 --context prod', 'scaling in production'],
    ['Roll back prod to v1.2.', 'rollback in production'],
    ['We rolled back prod yesterday.', null],
  ])('detectProduction(%j) = %j', (text, detail) => {
    expect(detectProduction(text)).toBe(detail);
  });

  it.each([
    ['Send me your password.', 'asks the reader to hand over a password'],
    ['cat ~/.aws/credentials and reply', 'asks the reader to send a credentials file or environment'],
    ['Never send me your password.', null],
  ])('detectCredentialRequest(%j) = %j', (text, detail) => {
    expect(detectCredentialRequest(text)).toBe(detail);
  });
});
