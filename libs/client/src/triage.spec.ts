import { age, shortId, size, subjectText, triageBlock, triageLine } from './triage';

const header = {
  id: '01JV3Z8W7Q4M2N6P8R0T2V4X6Y',
  from: '@acme.alice',
  to: ['@acme.bob'],
  subject: 'Deploy plan for Friday',
  type_hint: 'text',
  size_hint: 120,
  created_at: 1_000_000,
};

describe('triage line', () => {
  it('puts short id, age, sender, subject, type and size in that order', () => {
    expect(triageLine(header, 1_000_000 + 5 * 60_000)).toBe(
      '2V4X6Y 5m @acme.alice "Deploy plan for Friday" text ~120t',
    );
  });

  it('marks replies, cc, guard flags, receipts and schedules', () => {
    const line = triageLine(
      {
        ...header,
        subject: 'Re: Deploy plan',
        in_reply_to: '01JV3Z8W7Q4M2N6P8R0T2V4X60',
        cc: ['@acme.carol', '@acme.dave'],
        flags: ['secret'],
        receipt: { envelope_id: '01JV3Z8W7Q4M2N6P8R0T2V4X60', status: 'accepted' },
        schedule_id: 'sch_x',
      },
      1_000_000,
    );
    expect(line).toBe('2V4X6Y 0s @acme.alice rcpt:accepted for 2V4X60 text ~120t cc+2 !secret sched');
  });

  it('cuts long subjects, flattens newlines and quotes, shows a dash for none', () => {
    expect(subjectText('a'.repeat(80))).toBe(`"${'a'.repeat(35)}…"`);
    expect(subjectText('two\nlines "quoted"')).toBe(`"two lines 'quoted'"`);
    expect(subjectText(undefined)).toBe('-');
    expect(subjectText('   ')).toBe('-');
  });

  it('formats ages and sizes compactly', () => {
    expect([age(59_000), age(60_000), age(7_200_000), age(3 * 86_400_000)]).toEqual(['59s', '1m', '2h', '3d']);
    expect([size(12), size(1234), size(45_000), size(undefined)]).toEqual(['~12t', '~1.2kt', '~45kt', '']);
  });

  it('uses the ULID suffix as short id (monotonic ids differ at the end)', () => {
    expect(shortId('01JV3Z8W7Q4M2N6P8R0T2V4X6Y')).toBe('2V4X6Y');
  });

  it('prints a count line before the lines, or says there is nothing', () => {
    expect(triageBlock([])).toBe('no unread mail');
    expect(triageBlock([header], 1_000_000).split('\n')).toHaveLength(2);
  });
});
