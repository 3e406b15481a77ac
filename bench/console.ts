import http from 'node:http';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { round, scratchDatabase, startOperatorProcess } from './support';

/**
 * The console (issue 19): bytes a first visit downloads (gzip, as served) and the time until the
 * first page is interactive in Chromium on loopback, cold cache each run: the sign-in form, and the
 * overview for a signed-in tab (token already in sessionStorage). Budgets: ≤ 300 KB, ≤ 1 s.
 */
const RUNS = 5;

function gzippedSize(url: string): Promise<{ bytes: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          if (res.statusCode !== 200) return reject(new Error(`${url}: ${res.statusCode}`));
          resolve({ bytes: raw.length, body: res.headers['content-encoding'] === 'gzip' ? '' : raw.toString('utf8') });
        });
      })
      .on('error', reject);
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

export async function consoleScenario(): Promise<Record<string, unknown>> {
  const database = await scratchDatabase('bench_console');
  const op = await startOperatorProcess({ DATABASE_URL: database.url });
  const profile = mkdtempSync(join(tmpdir(), 'roost-bench-chromium-'));
  try {
    const base = `${op.url}/console/`;
    const index = await new Promise<string>((resolve, reject) =>
      http
        .get(base, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve(text));
        })
        .on('error', reject),
    );
    const assets = [...index.matchAll(/(?:src|href)="\.\/([^"]+)"/g)].map((match) => match[1]);
    let gzipBytes = (await gzippedSize(base)).bytes;
    for (const asset of assets) gzipBytes += (await gzippedSize(`${base}${asset}`)).bytes;
    // Every built file, as served: the first visit plus the chunks loaded later (the Markdown sanitiser).
    let allBytes = (await gzippedSize(base)).bytes;
    const built = readdirSync(join(__dirname, '..', 'console', 'assets'));
    for (const name of built) allBytes += (await gzippedSize(`${base}assets/${name}`)).bytes;

    const context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.ROOST_CHROMIUM ?? '/usr/bin/chromium',
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const signIn: number[] = [];
    const overview: number[] = [];
    const blank: number[] = [];
    try {
      for (let run = 0; run < RUNS; run++) {
        // The browser's own floor on this machine now: a one-line JSON page (/healthz), loaded.
        const floor = await context.newPage();
        await floor.goto(`${op.url}/healthz`, { waitUntil: 'load' });
        blank.push(await floor.evaluate<number>('performance.now()'));
        await floor.close();
        for (const signedIn of [false, true]) {
          const page = await context.newPage();
          // Cold: no HTTP cache between runs.
          const cdp = await context.newCDPSession(page);
          await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
          if (signedIn)
            await page.addInitScript(`sessionStorage.setItem('roost.console.token', ${JSON.stringify(op.adminToken)})`);
          await page.goto(base, { waitUntil: 'commit' });
          // Interactive: the page's first control is rendered and enabled (page clock since navigation start).
          const selector = signedIn ? '#deps' : 'input[name="token"]:not([disabled])';
          await page.waitForSelector(selector, { timeout: 30_000 });
          const ms = await page.evaluate<number>('performance.now()');
          (signedIn ? overview : signIn).push(ms);
          await page.close();
        }
      }
    } finally {
      await context.close();
    }
    return {
      scenario: 'console',
      first_visit_files: assets.length + 1,
      first_visit_gzip_kb: round(gzipBytes / 1024, 1),
      assets_gzip_kb: round(allBytes / 1024, 1),
      signin_interactive_ms: round(median(signIn), 0),
      overview_interactive_ms: round(median(overview), 0),
      blank_page_ms: round(median(blank), 0),
      runs: RUNS,
      signin_ms_all: signIn.map((ms) => round(ms, 0)),
      overview_ms_all: overview.map((ms) => round(ms, 0)),
      loadavg_1m: round(loadavg()[0], 2),
    };
  } finally {
    rmSync(profile, { recursive: true, force: true });
    await op.stop();
    await database.drop();
  }
}
