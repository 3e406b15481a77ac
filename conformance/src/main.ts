#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { causeText, Failure, Skip } from './assert';
import { GROUPS, registeredTests, Run, T, type Group, type Options, type TestDef } from './runner';
import './asmtp';
import './interop';
import './roost';

/**
 * The ASMTP conformance suite: black-box against any operator URL (docs/conformance.md).
 *
 *   node dist/conformance/src/main.js --url http://127.0.0.1:8025 --admin-token <token> [--json report.json]
 */

const USAGE = `usage: conformance --url <base> --admin-token <token> [options]

  --url <base>             operator base URL (env ROOST_CONFORMANCE_URL)
  --admin-token <token>    operator admin token (env ROOST_CONFORMANCE_ADMIN_TOKEN)
  --json <file>            write a JSON report
  --group <g,…>            groups to run: asmtp, interop, roost (default: all)
  --no-extensions          plain ASMTP operator: leave out the roost group
  --only <regex>           run only the tests whose id matches
  --public-url <base>      the base file urls must start with (default: --url)
  --ws-settle-ms <n>       pause after a socket opens before sending (default 300)
  --quiet-ms <n>           how long "no further frame" is watched (default 500)
  --frame-timeout-ms <n>   how long an expected frame may take (default 10000)
  --test-timeout-ms <n>    per test (default 120000)
  --concurrency <n>        tests run at once (default 4; timing-sensitive ones always run alone)
  --keep-agents            do not delete the agents the run created
  --verbose                print request counts and cleanup details
  --list                   list the tests and exit`;

export interface Result {
  id: string;
  group: Group;
  title: string;
  status: 'PASS' | 'FAIL' | 'SKIP';
  reason?: string;
  notes?: string[];
  duration_ms: number;
}

function parseArgs(argv: string[]): { options: Options; list: boolean } {
  const value = (flag: string, i: number): string => {
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${flag} needs a value`);
    return v;
  };
  const int = (flag: string, raw: string): number => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${flag}: expected a non-negative integer, got ${raw}`);
    return n;
  };
  let url = process.env.ROOST_CONFORMANCE_URL ?? '';
  let adminToken = process.env.ROOST_CONFORMANCE_ADMIN_TOKEN ?? '';
  let publicUrl: string | undefined;
  let groups = new Set<Group>(GROUPS);
  let extensions = true;
  let list = false;
  const options: Partial<Options> = {
    verbose: false,
    keepAgents: false,
    wsSettleMs: 300,
    quietMs: 500,
    frameTimeoutMs: 10_000,
    testTimeoutMs: 120_000,
    concurrency: 4,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    switch (flag) {
      case '--url':
        url = value(flag, i++);
        break;
      case '--admin-token':
        adminToken = value(flag, i++);
        break;
      case '--json':
        options.json = value(flag, i++);
        break;
      case '--public-url':
        publicUrl = value(flag, i++);
        break;
      case '--only':
        options.only = new RegExp(value(flag, i++));
        break;
      case '--group': {
        const names = value(flag, i++)
          .split(',')
          .map((g) => g.trim())
          .filter(Boolean);
        for (const name of names)
          if (!(GROUPS as readonly string[]).includes(name)) throw new Error(`unknown group ${name}`);
        groups = new Set(names as Group[]);
        break;
      }
      case '--no-extensions':
        extensions = false;
        break;
      case '--ws-settle-ms':
        options.wsSettleMs = int(flag, value(flag, i++));
        break;
      case '--quiet-ms':
        options.quietMs = int(flag, value(flag, i++));
        break;
      case '--frame-timeout-ms':
        options.frameTimeoutMs = int(flag, value(flag, i++));
        break;
      case '--test-timeout-ms':
        options.testTimeoutMs = int(flag, value(flag, i++));
        break;
      case '--concurrency':
        options.concurrency = Math.max(1, int(flag, value(flag, i++)));
        break;
      case '--keep-agents':
        options.keepAgents = true;
        break;
      case '--verbose':
        options.verbose = true;
        break;
      case '--list':
        list = true;
        break;
      case '-h':
      case '--help':
        process.stdout.write(`${USAGE}\n`);
        process.exit(0);
      // falls through (unreachable)
      default:
        throw new Error(`unknown argument ${flag}`);
    }
  }
  if (!extensions) groups.delete('roost');
  if (!list) {
    if (!url) throw new Error('--url (or ROOST_CONFORMANCE_URL) is required');
    if (!adminToken) throw new Error('--admin-token (or ROOST_CONFORMANCE_ADMIN_TOKEN) is required');
  }
  url = url.replace(/\/+$/, '');
  return {
    options: { ...(options as Options), url, adminToken, publicUrl: (publicUrl ?? url).replace(/\/+$/, ''), groups },
    list,
  };
}

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, ' ⏎ ').trim();

async function runOne(run: Run, def: TestDef, index: number): Promise<Result> {
  const started = Date.now();
  const t = new T(run, def, index);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Failure(`test timed out after ${run.options.testTimeoutMs} ms`)),
      run.options.testTimeoutMs,
    );
  });
  const result = (status: Result['status'], reason?: string): Result => ({
    id: def.id,
    group: def.group,
    title: def.title,
    status,
    ...(reason !== undefined ? { reason: oneLine(reason) } : {}),
    ...(t.notes.length > 0 ? { notes: t.notes.map(oneLine) } : {}),
    duration_ms: Date.now() - started,
  });
  try {
    await Promise.race([def.run(t).then(() => t.finish()), timeout]);
    return result('PASS');
  } catch (error) {
    if (error instanceof Skip) return result('SKIP', error.message);
    if (error instanceof Failure) return result('FAIL', error.message);
    return result(
      'FAIL',
      `unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
  } finally {
    clearTimeout(timer);
    t.close();
  }
}

/**
 * Run the tests `concurrency` at a time (an exclusive test waits for the others and runs alone);
 * results are reported in registration order.
 */
async function runAll(run: Run, selected: readonly TestDef[], report: (result: Result) => void): Promise<Result[]> {
  const results: Array<Result | undefined> = new Array(selected.length);
  let reported = 0;
  const settle = (i: number, result: Result) => {
    results[i] = result;
    while (reported < selected.length && results[reported] !== undefined) report(results[reported++]!);
  };
  const running = new Set<Promise<void>>();
  for (let i = 0; i < selected.length; i++) {
    const def = selected[i];
    if (def.exclusive) await Promise.all(running);
    while (running.size >= run.options.concurrency) await Promise.race(running);
    const task = runOne(run, def, registeredTests().indexOf(def)).then((result) => settle(i, result));
    const tracked = task.finally(() => running.delete(tracked));
    running.add(tracked);
    if (def.exclusive) await tracked;
  }
  await Promise.all(running);
  return results as Result[];
}

/** Reachable, and the admin token is accepted: else there is nothing to test. */
async function preflight(run: Run): Promise<void> {
  let status: number;
  try {
    status = (
      await fetch(`${run.options.url}/_admin/agents`, {
        headers: { authorization: `Bearer ${run.options.adminToken}` },
        signal: AbortSignal.timeout(15_000),
      })
    ).status;
  } catch (error) {
    throw new Error(`${run.options.url} is not reachable: ${causeText(error)}`, { cause: error });
  }
  if (status === 401) throw new Error('the admin token was refused (GET /_admin/agents → 401)');
  if (status !== 200)
    throw new Error(
      `GET /_admin/agents → ${status}: the suite provisions its agents through /_admin/agents (ASMTP.md §1.4)`,
    );
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`conformance: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { options, list } = parsed;
  const selected = registeredTests().filter(
    (def) => options.groups.has(def.group) && (!options.only || options.only.test(def.id)),
  );
  if (list) {
    for (const def of selected) process.stdout.write(`${def.id} ${def.title}\n`);
    return 0;
  }
  const run = new Run(options);
  try {
    await preflight(run);
  } catch (error) {
    process.stderr.write(`conformance: ${(error as Error).message}\n`);
    return 2;
  }
  process.stdout.write(
    `ASMTP conformance against ${options.url} (groups ${[...options.groups].join(', ')}; owner prefix ${run.prefix})\n`,
  );
  const started = Date.now();
  const results = await runAll(run, selected, (result) => {
    const reason = result.reason !== undefined ? ` — ${result.reason}` : '';
    process.stdout.write(`${result.status} ${result.id} ${result.title}${reason}\n`);
    if (options.verbose) for (const note of result.notes ?? []) process.stdout.write(`  note: ${note}\n`);
  });
  if (!options.keepAgents) {
    const cleaned = await run.cleanup();
    if (options.verbose || cleaned.failed > 0) {
      process.stdout.write(
        `cleanup: deleted ${cleaned.agents - cleaned.failed} of ${cleaned.agents} agents and ${run.orgs.size} organizations\n`,
      );
    }
  }
  const passed = results.filter((r) => r.status === 'PASS').length;
  const failed = results.filter((r) => r.status === 'FAIL').length;
  const skipped = results.filter((r) => r.status === 'SKIP').length;
  const byGroup = Object.fromEntries(
    [...options.groups]
      .filter((group) => results.some((r) => r.group === group))
      .map((group) => {
        const count = (status: Result['status']) =>
          results.filter((r) => r.group === group && r.status === status).length;
        return [group, { passed: count('PASS'), failed: count('FAIL'), skipped: count('SKIP') }];
      }),
  );
  if (options.verbose)
    process.stdout.write(
      `${run.http.stats.requests} requests, ${run.http.stats.retried429} retried after 429, ${Date.now() - started} ms\n`,
    );
  if (options.json) {
    const report = {
      target: options.url,
      groups: [...options.groups],
      prefix: run.prefix,
      started_at: new Date(started).toISOString(),
      duration_ms: Date.now() - started,
      summary: { passed, failed, skipped },
      by_group: byGroup,
      tests: results,
    };
    writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
  }
  for (const [group, totals] of Object.entries(byGroup)) {
    process.stdout.write(
      `group ${group}: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped\n`,
    );
  }
  process.stdout.write(`${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  return failed > 0 ? 1 : 0;
}

process.on('unhandledRejection', (error) => {
  process.stderr.write(`conformance: unhandled rejection: ${error instanceof Error ? error.message : String(error)}\n`);
});

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`conformance: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(2);
  },
);
