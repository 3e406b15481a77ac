import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { ulid } from '#domain';
import { startOperator, type TestOperator } from '../support/operator';

/**
 * The console in Debian's Chromium against a real operator (in-process, Postgres): sign-in with
 * each token kind, provisioning, the live mailbox, a hostile envelope, tenant isolation; axe-core
 * on every page and screenshots of each page at both viewports in artifacts/console/.
 */
const CHROMIUM = process.env.ROOST_CHROMIUM ?? '/usr/bin/chromium';
const ARTIFACTS = resolve(__dirname, '../../artifacts/console');
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

interface AxeResult {
  violations: Array<{ id: string; impact: string | null; nodes: Array<{ target: unknown }> }>;
}

let operator: TestOperator;
let context: BrowserContext;
let page: Page;
let profile: string;
const dialogs: string[] = [];
const suffix = ulid().slice(-6).toLowerCase();
const org = `acme${suffix}`;
const otherOrg = `other${suffix}`;
let orgToken = '';

beforeAll(async () => {
  operator = await startOperator();
  profile = mkdtempSync(join(tmpdir(), 'roost-chromium-'));
  mkdirSync(ARTIFACTS, { recursive: true });
  // A persistent context is how Playwright takes a fresh --user-data-dir.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: VIEWPORTS.desktop,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
});

afterAll(async () => {
  await context?.close();
  await operator?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** axe-core on the current page (run through the DevTools protocol: the CSP refuses injected tags). */
async function expectAccessible(name: string): Promise<void> {
  await page.evaluate(AXE);
  const result = await page.evaluate<AxeResult>('axe.run(document, { resultTypes: ["violations"] })');
  const serious = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect({
    page: name,
    violations: serious.map((v) => `${v.id}: ${JSON.stringify(v.nodes.map((n) => n.target))}`),
  }).toEqual({ page: name, violations: [] });
}

/** Screenshots at 1280×800 and 390×844, plus an axe run at each size. */
async function capture(name: string): Promise<void> {
  for (const [size, viewport] of Object.entries(VIEWPORTS)) {
    await page.setViewportSize(viewport);
    await expectAccessible(`${name} (${size})`);
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${size}.png`), fullPage: true });
  }
  await page.setViewportSize(VIEWPORTS.desktop);
}

async function signIn(token: string): Promise<void> {
  await page.goto(`${operator.url}/console`);
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('scope').waitFor();
}

async function signOut(): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Admin token').waitFor();
}

async function send(token: string, body: Record<string, unknown>): Promise<string> {
  const id = ulid();
  const reply = await operator.client.post('/messages', { id, date_ms: Date.now(), ...body }, token);
  expect(reply.status).toBe(202);
  return id;
}

describe('console in Chromium', () => {
  let botToken = '';
  let peerToken = '';
  const bot = () => `@${org}.bot`;
  const peer = () => `@${org}.peer`;

  it('serves the console with its security headers and keeps the token out of localStorage and cookies', async () => {
    const res = await fetch(`${operator.url}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    await page.goto(`${operator.url}/console`);
    expect(page.url()).toBe(`${operator.url}/console/`);
    await page.getByLabel('Admin token').waitFor();
    await capture('signin');
    await page.getByLabel('Admin token').fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').textContent()).toContain('UNAUTHORIZED');
  });

  it('signs in with the operator token from the keyboard alone, shows the operator scope and the overview', async () => {
    await page.goto(`${operator.url}/console/`);
    await page.getByLabel('Admin token').waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement && document.activeElement.name')).toBe('token');
    await page.keyboard.type(operator.adminToken);
    await page.keyboard.press('Enter');
    await page.getByTestId('scope').waitFor();
    // The skip link takes keyboard users past the navigation to the page.
    await page.getByRole('link', { name: 'Skip to content' }).focus();
    await page.keyboard.press('Enter');
    expect(await page.evaluate('document.activeElement && document.activeElement.id')).toBe('main');
    expect(await page.getByTestId('scope').textContent()).toBe('Operator');
    expect(await page.evaluate('Object.keys(localStorage).length')).toBe(0);
    expect(await page.evaluate('document.cookie')).toBe('');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('heading', { name: 'Dependencies' }).waitFor();
    await capture('overview');
  });

  it('creates an organization and shows its admin token once', async () => {
    await page.getByRole('link', { name: 'Organizations' }).click();
    await page.getByLabel('Name').fill(org);
    await page.getByRole('button', { name: 'Create' }).click();
    orgToken = await page.getByTestId('token').inputValue();
    expect(orgToken.length).toBeGreaterThan(10);
    expect((await operator.client.get('/_admin/agents', orgToken)).status).toBe(200);
    await capture('orgs');
    await page.getByRole('button', { name: 'Done' }).click();
    await expect(page.getByTestId('token').count()).resolves.toBe(0);
  });

  it('signs in with the organization token: its scope, no Organizations section', async () => {
    await signOut();
    await signIn(orgToken);
    expect(await page.getByTestId('scope').textContent()).toBe(`Organization ${org}`);
    expect(await page.getByRole('link', { name: 'Organizations' }).count()).toBe(0);
  });

  it('creates an agent with its token shown once, and finds it by server-side search', async () => {
    await page.getByRole('link', { name: 'Agents' }).click();
    await page.getByLabel('Handle').fill(bot());
    await page.getByLabel('Inbound policy').selectOption('open');
    await page.getByRole('button', { name: 'Create' }).click();
    botToken = await page.getByTestId('token').inputValue();
    expect((await operator.client.get('/mailbox', botToken)).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();
    peerToken = (await operator.client.post('/_admin/agents', { handle: peer(), policy: 'open' }, orgToken)).body
      .token as string;
    await page.getByLabel('Search agents').fill('peer');
    await page.getByRole('link', { name: peer() }).waitFor();
    await page.getByRole('link', { name: bot() }).waitFor({ state: 'detached' });
    await page.getByLabel('Search agents').fill('');
    await page.getByRole('link', { name: bot() }).waitFor();
    await capture('agents');
  });

  it('shows a header sent through the API live, without reload', async () => {
    await page.getByRole('link', { name: bot() }).click();
    await page.getByTestId('live').filter({ hasText: 'Live' }).waitFor();
    await send(peerToken, {
      to: [bot()],
      subject: 'Hello from peer',
      content_parts: [{ type: 'text', text: 'First **bold** line' }],
    });
    await page.getByRole('link', { name: 'Hello from peer' }).waitFor({ timeout: 10_000 });
    expect(await page.getByTestId('live').textContent()).toContain('1 new');
  });

  it('opens the body (text, data, a file download) and the thread, without changing the agent read state', async () => {
    const form = new FormData();
    form.append('file', new Blob(['file body 42'], { type: 'text/plain' }), 'notes.txt');
    const upload = await fetch(`${operator.url}/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${peerToken}` },
      body: form,
    });
    expect(upload.status).toBe(201);
    const fileId = ((await upload.json()) as { id: string }).id;
    const first = await send(peerToken, {
      to: [bot()],
      subject: 'Thread start',
      content_parts: [
        { type: 'text', text: 'The *first* message' },
        { type: 'data', data: { answer: 42 } },
        { type: 'file', file_id: fileId, name: 'notes.txt' },
      ],
    });
    await send(peerToken, {
      to: [bot()],
      subject: 'Thread reply',
      in_reply_to: first,
      references: [first],
      content_parts: [{ type: 'text', text: 'A reply' }],
    });
    await page.getByRole('link', { name: 'Thread reply' }).click();
    await page.getByTestId('thread').getByRole('link', { name: 'Thread start' }).click();
    await page.getByTestId('subject').filter({ hasText: 'Thread start' }).waitFor();
    await page.getByTestId('body').locator('em', { hasText: 'first' }).waitFor();
    expect(await page.getByTestId('body').textContent()).toContain('"answer": 42');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download notes.txt' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('notes.txt');
    expect(readFileSync(await download.path(), 'utf8')).toBe('file body 42');
    await page.getByTestId('thread').getByRole('link', { name: 'Thread reply' }).waitFor();
    const receipt = await operator.client.post(
      `/messages/${first}/receipts`,
      { status: 'accepted', note: 'on it' },
      botToken,
    );
    expect(receipt.status).toBeLessThan(300);
    await page.reload();
    await page.getByTestId('receipts').getByText('on it').waitFor();
    await capture('message');
    const unread = await operator.client.get('/mailbox?unread=true&limit=50', botToken);
    expect((unread.body.envelope_headers as Array<{ id: string }>).map((h) => h.id)).toContain(first);
  });

  it('renders a hostile subject and body inert: no script, no dialog, no javascript: link', async () => {
    const hostile = '<script>window.__pwned = 1; alert(1)</script><img src=x onerror="window.__pwned = 2; alert(2)">';
    const id = await send(peerToken, {
      to: [bot()],
      subject: `${hostile} subject`,
      content_parts: [
        {
          type: 'text',
          text: `${hostile}\n\n[click me](javascript:window.__pwned=3)\n\n<a href="javascript:alert(4)">raw link</a>\n\n<iframe src="javascript:alert(5)"></iframe>`,
        },
        { type: 'file', url: 'javascript:alert(6)', name: 'evil.txt' },
      ],
    });
    await page.goto(`${operator.url}/console/#/agents/${encodeURIComponent(bot())}/messages/${id}`);
    await page.getByTestId('subject').filter({ hasText: '<script>' }).waitFor();
    await page.getByTestId('body').locator('.markdown').first().waitFor();
    await page.getByTestId('body').locator('.markdown').getByText('click me').waitFor();
    expect(await page.locator('[href^="javascript:" i], [src^="javascript:" i], iframe, [onerror]').count()).toBe(0);
    await page.getByTestId('body').locator('.markdown').getByText('click me').click();
    await page.getByTestId('body').getByText('raw link').click();
    await page.waitForTimeout(300);
    expect(page.url()).toContain(`/messages/${id}`);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(dialogs).toEqual([]);
    // The same text with Markdown off is shown as text.
    await page.getByLabel('Render Markdown (sanitised)').uncheck();
    expect(await page.getByTestId('body').textContent()).toContain('<script>');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
  });

  it('pauses, resumes and cancels a schedule of the agent', async () => {
    const created = await operator.client.post(
      '/schedules',
      {
        envelope: { to: [peer()], subject: 'Daily report', content_parts: [{ type: 'text', text: 'report' }] },
        interval_ms: 86_400_000,
        max_count: 3,
        start_at: Date.now() + 3_600_000,
      },
      botToken,
    );
    expect({ status: created.status, text: created.text }).toMatchObject({ status: 201 });
    await page.goto(`${operator.url}/console/#/agents/${encodeURIComponent(bot())}`);
    const row = page.getByRole('row').filter({ hasText: 'Daily report' });
    await row.getByRole('button', { name: 'Pause' }).click();
    await row.getByText('paused').waitFor();
    await row.getByRole('button', { name: 'Resume' }).click();
    await row.getByText('active').waitFor();
    await capture('agent');
    await row.getByRole('button', { name: 'Cancel' }).click();
    await row.getByText('cancelled').waitFor();
  });

  it('rotates the agent token: the old one stops working, the shown one works', async () => {
    await page.getByRole('button', { name: 'Rotate token' }).click();
    const fresh = await page.getByTestId('token').inputValue();
    expect(fresh).not.toBe(botToken);
    expect((await operator.client.get('/mailbox', botToken)).status).toBe(401);
    expect((await operator.client.get('/mailbox', fresh)).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();
  });

  it('keeps an organization admin out of another organization, in the UI and the routes', async () => {
    await operator.client.post('/_admin/orgs', { name: otherOrg }, operator.adminToken);
    await operator.client.post('/_admin/agents', { handle: `@${otherOrg}.x`, policy: 'open' }, operator.adminToken);
    await page.goto(`${operator.url}/console/#/agents/${encodeURIComponent(`@${otherOrg}.x`)}`);
    await page.getByRole('alert').first().waitFor();
    expect(await page.getByRole('alert').first().textContent()).toContain('NOT_FOUND');
    await page.goto(`${operator.url}/console/#/agents`);
    await page.getByLabel('Search agents').fill(otherOrg);
    await page.getByText('No agents match.').waitFor();
    for (const path of ['', '/mailbox', '/schedules']) {
      expect(
        (await operator.client.get(`/_admin/agents/${encodeURIComponent(`@${otherOrg}.x`)}${path}`, orgToken)).status,
      ).toBe(404);
    }
  });

  it('deletes an agent only after its handle is typed, saying what stays', async () => {
    await page.goto(`${operator.url}/console/#/agents/${encodeURIComponent(bot())}`);
    await page.getByRole('button', { name: 'Delete agent' }).click();
    const form = page.getByRole('form', { name: 'Delete agent' });
    expect(await form.textContent()).toContain("stay in their recipients' mailboxes");
    const confirm = form.getByRole('button', { name: 'Delete agent' });
    expect(await confirm.isDisabled()).toBe(true);
    await form.getByLabel(/to confirm/).fill(bot());
    await confirm.click();
    await page.getByRole('heading', { name: 'Agents' }).waitFor();
    expect((await operator.client.get(`/_admin/agents/${encodeURIComponent(bot())}`, orgToken)).status).toBe(404);
  });

  it('lets the operator rotate and delete an organization', async () => {
    await signOut();
    await signIn(operator.adminToken);
    await page.getByRole('link', { name: 'Organizations' }).click();
    await page.getByRole('button', { name: `Settings of ${org}` }).click();
    const settings = page.getByRole('form', { name: `Settings of ${org}` });
    await settings.getByLabel(/Retention/).fill('30');
    await settings.getByLabel('Content guard').selectOption('warn');
    await settings.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('row').filter({ hasText: '30 days' }).waitFor();
    expect((await operator.client.get(`/_admin/orgs/${org}`, operator.adminToken)).body).toMatchObject({
      retention_days: 30,
      content_guard: 'warn',
    });
    await page.getByRole('button', { name: `Rotate token of ${org}` }).click();
    const fresh = await page.getByTestId('token').inputValue();
    expect((await operator.client.get('/_admin/agents', orgToken)).status).toBe(401);
    expect((await operator.client.get('/_admin/agents', fresh)).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('button', { name: `Delete ${org}` }).click();
    const form = page.getByRole('form', { name: 'Delete organization' });
    await form.getByLabel(/to confirm/).fill(org);
    await form.getByRole('button', { name: 'Delete organization' }).click();
    await page.getByRole('row').filter({ hasText: org }).waitFor({ state: 'detached' });
    await page.getByRole('row').filter({ hasText: otherOrg }).waitFor();
    expect((await operator.client.get(`/_admin/orgs/${org}`, operator.adminToken)).status).toBe(404);
  });
});
