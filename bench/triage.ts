// js-tiktoken's types resolve as ESM under node16; its CommonJS build is what runs.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the CommonJS build, see above
const { getEncoding } = require('js-tiktoken') as {
  getEncoding: (name: 'o200k_base' | 'cl100k_base') => { encode(text: string): number[] };
};
import { deterministicUlid } from '#domain';
import { triageBlock, triageLine, type TriageHeader } from '#client';

/**
 * `npm run bench -- triage`: what 84 unread headers cost a model, measured with real tokenizers
 * (o200k_base: GPT-4o/GPT-5 family; cl100k_base: GPT-4): the `roost inbox` triage lines against the
 * same headers as the JSON `GET /mailbox` returns. Deterministic input, no operator needed.
 */

const SENDERS = [
  '@acme.alice',
  '@acme.carol',
  '@build.ci-runner',
  '@ops.deploy-bot',
  '@research.planner',
  '@acme.reviewer-2',
];
const SUBJECTS = [
  'Deploy plan for Friday',
  'Re: flaky test in accept path',
  'Nightly build failed on main: 3 suites, see logs',
  'Can you take the schema migration?',
  'Weekly status',
  'Question about the retention defaults in the Helm chart values file',
  'Review PR #412 (gateway backfill)',
  'Decision needed: Postgres 16 or 17 for staging',
  'FYI: rate limit raised to 200/s',
  'Re: Re: token rotation broke the listener',
  'Benchmark numbers for accept batching',
  undefined,
];
const TYPES = ['text', 'text', 'text', 'data', 'mixed', 'file'] as const;
const FLAGS = [undefined, undefined, undefined, undefined, ['secret'], ['destructive'], ['production', 'large']];
const STATUSES = ['accepted', 'rejected', 'deferred', 'needs_confirmation', 'applied', 'blocked'];

/** 84 unread headers as an agent finds them after a day away: the wire shape of `GET /mailbox`. */
export function sampleHeaders(
  count = 84,
  now = Date.UTC(2026, 4, 12, 9),
): Array<TriageHeader & Record<string, unknown>> {
  const headers: Array<TriageHeader & Record<string, unknown>> = [];
  for (let i = 0; i < count; i++) {
    const createdAt = now - (count - i) * 17 * 60_000 - (i % 7) * 1_337;
    const id = deterministicUlid(`triage-${i}`, createdAt);
    const header: TriageHeader & Record<string, unknown> = {
      op: 'envelope.notify',
      id,
      from: SENDERS[i % SENDERS.length],
      to: ['@acme.bob'],
      type_hint: TYPES[i % TYPES.length],
      size_hint: [12, 85, 340, 1_250, 4_800, 23][i % 6],
      created_at: createdAt,
      date_ms: createdAt - 40,
    };
    if (i % 5 === 0) header.cc = ['@acme.carol', '@acme.dave'];
    const subject = SUBJECTS[i % SUBJECTS.length];
    if (subject !== undefined) header.subject = subject;
    if (i % 3 === 1) header.in_reply_to = deterministicUlid(`triage-parent-${i}`, createdAt - 3_600_000);
    const flags = FLAGS[i % FLAGS.length];
    if (flags) header.flags = flags;
    if (i % 9 === 4) {
      header.type_hint = 'data';
      header.receipt = {
        envelope_id: deterministicUlid(`triage-sent-${i}`, createdAt - 7_200_000),
        status: STATUSES[i % STATUSES.length],
      };
      delete header.subject;
    }
    if (i % 13 === 6) header.schedule_id = `sch_${deterministicUlid(`triage-schedule-${i}`, createdAt - 86_400_000)}`;
    // Wire key order (ASMTP.md §6.3), extensions last.
    const order = [
      'op',
      'id',
      'from',
      'to',
      'cc',
      'subject',
      'in_reply_to',
      'type_hint',
      'size_hint',
      'created_at',
      'date_ms',
      'flags',
      'receipt',
      'schedule_id',
    ];
    headers.push(
      Object.fromEntries(order.filter((k) => k in header).map((k) => [k, header[k]])) as TriageHeader &
        Record<string, unknown>,
    );
  }
  return headers;
}

export async function triageScenario(): Promise<Record<string, unknown>> {
  const now = Date.UTC(2026, 4, 12, 9);
  const headers = sampleHeaders(84, now);
  const lines = headers.map((h) => triageLine(h, now));
  const block = triageBlock(headers, now);
  const json = JSON.stringify({ envelope_headers: headers, next_cursor: null });
  const result: Record<string, unknown> = { scenario: 'triage', headers: headers.length };
  for (const name of ['o200k_base', 'cl100k_base'] as const) {
    const encoding = getEncoding(name);
    const perLine = lines.map((line) => encoding.encode(line).length).sort((a, b) => a - b);
    const jsonTokens = encoding.encode(json).length;
    const blockTokens = encoding.encode(block).length;
    result[name] = {
      line_mean: Number((perLine.reduce((a, b) => a + b, 0) / perLine.length).toFixed(1)),
      line_median: perLine[Math.floor(perLine.length / 2)],
      line_max: perLine[perLine.length - 1],
      lines_over_30: perLine.filter((n) => n > 30).length,
      triage_total: blockTokens,
      json_total: jsonTokens,
      json_per_header: Number((jsonTokens / headers.length).toFixed(1)),
      ratio: Number((jsonTokens / blockTokens).toFixed(1)),
    };
  }
  result.example = lines.slice(0, 3);
  return result;
}
