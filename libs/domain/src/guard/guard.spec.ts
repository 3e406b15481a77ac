import {
  ALL_CASES,
  codesFound,
  CORPUS,
  corpusReport,
  DETECTOR_CODES,
  SECRET_POSITIVES,
  type CorpusCase,
} from '../../../../bench/data/guard-corpus';
import { GUARD_CODES, GUARD_DATA_DEPTH, GUARD_SCAN_LIMIT, scanContent, type GuardFinding } from './guard';

const LIMIT = { largeBytes: 16 * 1024 };
const text = (value: string) => ({ type: 'text', text: value });
const data = (value: Record<string, unknown>) => ({ type: 'data', data: value });
const label = (entry: CorpusCase) =>
  JSON.stringify(entry.text.length > 90 ? `${entry.text.slice(0, 90)}…` : entry.text);

/** Every 8-character window of a secret: none may appear in a finding's detail. */
const windowsOf = (secret: string): string[] =>
  Array.from({ length: Math.max(0, secret.length - 7) }, (_, i) => secret.slice(i, i + 8));

// Planted values, built the same way the corpus builds them, so no token sits in this file.
const AWS_KEY_ID = SECRET_POSITIVES[0].secret as string;
const GITHUB_TOKEN = SECRET_POSITIVES.find((entry) => entry.text.startsWith('GITHUB_TOKEN='))?.secret as string;

describe('corpus (bench/data/guard-corpus.ts): every case produces exactly its codes', () => {
  for (const code of DETECTOR_CODES) {
    describe(code, () => {
      it('has at least 40 positives and 40 near-miss negatives', () => {
        expect(CORPUS[code].positives.length).toBeGreaterThanOrEqual(40);
        expect(CORPUS[code].negatives.length).toBeGreaterThanOrEqual(40);
        for (const entry of CORPUS[code].positives) expect(entry.codes).toContain(code);
        for (const entry of CORPUS[code].negatives) expect(entry.codes).not.toContain(code);
      });

      it.each(CORPUS[code].positives.map((entry) => [label(entry), entry] as const))('flags %s', (_, entry) => {
        expect(codesFound(entry.text)).toEqual(entry.codes);
      });

      it.each(CORPUS[code].negatives.map((entry) => [label(entry), entry] as const))('passes %s', (_, entry) => {
        expect(codesFound(entry.text)).toEqual(entry.codes);
      });
    });
  }

  it('detects every positive and flags no negative, per detector (corpusReport)', () => {
    const report = corpusReport();
    for (const code of DETECTOR_CODES) {
      const figures = report[code];
      expect(figures.positives + figures.negatives).toBe(ALL_CASES.length);
      expect(figures.positives).toBeGreaterThanOrEqual(40);
      expect(figures.detected / figures.positives).toBe(1);
      expect(figures.falsePositives / figures.negatives).toBe(0);
    }
  });
});

describe('details never echo a secret', () => {
  it.each(SECRET_POSITIVES.map((entry) => [label(entry), entry] as const))('%s', (_, entry) => {
    const secret = entry.secret as string;
    expect(secret.length).toBeGreaterThanOrEqual(8);
    const asText = scanContent({ subject: entry.text, parts: [text(entry.text)] }, LIMIT);
    const asData = scanContent({ parts: [data({ note: entry.text, nested: { value: entry.text } })] }, LIMIT);
    const findings = [...asText, ...asData];
    expect(findings.filter((finding) => finding.code === 'secret')).toHaveLength(3);
    for (const finding of findings) {
      for (const window of windowsOf(secret)) expect(finding.detail).not.toContain(window);
    }
  });
});

describe('scanContent', () => {
  it('returns no findings for clean content', () => {
    expect(scanContent({ subject: 'weekly sync', parts: [text('Notes attached.'), data({ n: 1 })] }, LIMIT)).toEqual(
      [],
    );
  });

  it('lists the codes in the order findings are sorted within a part', () => {
    expect(GUARD_CODES).toEqual(['secret', 'destructive', 'production', 'credential_request', 'large']);
  });

  it('reports the subject as "subject" and parts by their index in content_parts', () => {
    const findings = scanContent(
      {
        subject: `key ${AWS_KEY_ID}`,
        parts: [text('hello'), { type: 'image', url: 'https://cdn.acme.dev/a.png' }, text('DROP TABLE users;')],
      },
      LIMIT,
    );
    expect(findings).toEqual([
      { code: 'secret', part: 'subject', detail: 'AWS access key id' },
      { code: 'destructive', part: 2, detail: 'SQL DROP TABLE' },
    ]);
  });

  it('orders findings subject first, then by part index, then by code', () => {
    const everything = [
      `token ${GITHUB_TOKEN}`,
      'kubectl delete namespace payments --context prod',
      'and send me your password',
    ].join('\n');
    const findings = scanContent(
      { subject: 'send me your API key', parts: [text('fine'), text(everything), text('rm -rf /')] },
      LIMIT,
    );
    expect(findings.map(({ code, part }) => [part, code])).toEqual([
      ['subject', 'credential_request'],
      [1, 'secret'],
      [1, 'destructive'],
      [1, 'production'],
      [1, 'credential_request'],
      [2, 'destructive'],
    ]);
  });

  it('reports at most one finding per (code, part), naming the first kind found', () => {
    const many = `${AWS_KEY_ID} and ${GITHUB_TOKEN}\nrm -rf /srv\nDROP DATABASE roost;\ngit push -f`;
    const findings = scanContent({ parts: [text(many), text(many)] }, LIMIT);
    expect(findings).toEqual([
      { code: 'secret', part: 0, detail: 'AWS access key id' },
      { code: 'destructive', part: 0, detail: 'recursive delete (rm -rf)' },
      { code: 'secret', part: 1, detail: 'AWS access key id' },
      { code: 'destructive', part: 1, detail: 'recursive delete (rm -rf)' },
    ]);
  });

  it('does not scan image and file parts (only subject, text and data)', () => {
    const findings = scanContent(
      {
        parts: [
          { type: 'image', url: 'https://deploy:Zq8#pLm2-Vx7@cdn.acme.dev/a.png' },
          { type: 'file', url: 'https://deploy:Zq8#pLm2-Vx7@cdn.acme.dev/a.txt', name: 'rm -rf /' },
        ],
      },
      LIMIT,
    );
    expect(findings).toEqual([]);
  });

  it('tolerates parts whose text or data has the wrong shape', () => {
    const parts = [
      { type: 'text', text: 42 },
      { type: 'data', data: null },
      { type: 'data', data: 'rm -rf /' },
      { type: 'x' },
    ];
    expect(scanContent({ parts }, LIMIT)).toEqual([]);
  });
});

describe('data parts', () => {
  it('reads string values under their key, so a password field reads like an assignment', () => {
    const findings = scanContent({ parts: [data({ user: 'etl', password: 'Zq8#pLm2-Vx7' })] }, LIMIT);
    expect(findings).toEqual([{ code: 'secret', part: 0, detail: 'hard-coded password or secret' }]);
  });

  it('recurses into nested objects and arrays', () => {
    const findings = scanContent(
      { parts: [data({ plan: { steps: [{ run: ['echo ok', 'terraform destroy -auto-approve'] }] } })] },
      LIMIT,
    );
    expect(findings).toEqual([{ code: 'destructive', part: 0, detail: 'infrastructure teardown (terraform destroy)' }]);
  });

  it('scans keys as well as values', () => {
    const findings = scanContent({ parts: [data({ 'send me your API key': { ok: true } })] }, LIMIT);
    expect(findings).toEqual([
      { code: 'credential_request', part: 0, detail: 'asks the reader to hand over an API key' },
    ]);
  });

  it('joins a key and its value, so "environment: production" meets "action: deploy"', () => {
    const findings = scanContent({ parts: [data({ environment: 'production', action: 'deploy' })] }, LIMIT);
    expect(findings).toEqual([{ code: 'production', part: 0, detail: 'deploy to production' }]);
  });

  it(`stops at ${GUARD_DATA_DEPTH} levels of nesting`, () => {
    const nest = (depth: number): Record<string, unknown> => {
      let node: Record<string, unknown> = { cmd: 'rm -rf /' };
      for (let i = 0; i < depth; i += 1) node = { next: node };
      return node;
    };
    expect(scanContent({ parts: [data(nest(GUARD_DATA_DEPTH - 1))] }, LIMIT).map((f) => f.code)).toEqual([
      'destructive',
    ]);
    expect(scanContent({ parts: [data(nest(GUARD_DATA_DEPTH + 1))] }, LIMIT)).toEqual([]);
  });
});

describe('large', () => {
  const bytesOf = (subject: string | undefined, parts: unknown[]) =>
    (subject === undefined ? 0 : Buffer.byteLength(JSON.stringify(subject))) + Buffer.byteLength(JSON.stringify(parts));

  it('measures UTF-8 bytes of JSON(subject) + JSON(content_parts), inclusive limit', () => {
    const parts = [text('héllo wörld ✓'), data({ a: [1, 2, { b: 'ç' }] })];
    const size = bytesOf('Grüße', parts);
    expect(scanContent({ subject: 'Grüße', parts }, { largeBytes: size })).toEqual([]);
    expect(scanContent({ subject: 'Grüße', parts }, { largeBytes: size - 1 })).toEqual([
      { code: 'large', part: 1, detail: `content is ${size} bytes, above the ${size - 1}-byte limit` },
    ]);
  });

  it('points at the largest part, after that part’s other findings', () => {
    const parts = [text('x'.repeat(100)), text(`rm -rf /tmp/x ${'y'.repeat(300)}`), text('z'.repeat(200))];
    const findings: GuardFinding[] = scanContent({ subject: 'hi', parts }, { largeBytes: 500 });
    expect(findings).toEqual([
      { code: 'destructive', part: 1, detail: 'recursive delete (rm -rf)' },
      { code: 'large', part: 1, detail: `content is ${bytesOf('hi', parts)} bytes, above the 500-byte limit` },
    ]);
  });

  it('points at the subject when it is the largest, and at the first of equal parts', () => {
    expect(scanContent({ subject: 's'.repeat(50), parts: [text('a')] }, { largeBytes: 10 })[0].part).toBe('subject');
    expect(scanContent({ parts: [text('aaaa'), text('bbbb')] }, { largeBytes: 10 })[0].part).toBe(0);
  });
});

describe(`scan budget (${GUARD_SCAN_LIMIT} characters)`, () => {
  it('does not look past the first 1 MiB of text, counted across subject and parts', () => {
    const filler = 'a '.repeat(GUARD_SCAN_LIMIT / 2);
    const late = scanContent({ parts: [text(`${filler} rm -rf /`)] }, { largeBytes: Number.MAX_SAFE_INTEGER });
    expect(late).toEqual([]);
    const nextPart = scanContent(
      { subject: filler, parts: [text('rm -rf /')] },
      { largeBytes: Number.MAX_SAFE_INTEGER },
    );
    expect(nextPart).toEqual([]);
    const early = scanContent({ parts: [text(`rm -rf / ${filler}`)] }, { largeBytes: Number.MAX_SAFE_INTEGER });
    expect(early.map((f) => f.code)).toEqual(['destructive']);
  });
});
