import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { RoostClient } from '#client';
import { startOperator, type TestOperator } from '../../support/operator';
import { CLI, cliHome } from './support';

/**
 * The MCP server (EXTENSIONS.md §8) through the SDK's own client: `roost mcp` over stdio (the built
 * CLI as a child process) and `/mcp` over Streamable HTTP, on the in-process and the Redis bus.
 */

const EXPECTED_TOOLS = [
  'agents',
  'inbox',
  'mark_read',
  'read',
  'receipt',
  'reply',
  'schedule',
  'search',
  'send',
  'status',
  'wait_for_mail',
];

let op: TestOperator;
const tokens: Record<string, string> = {};
const clients: Client[] = [];

beforeAll(async () => {
  op = await startOperator();
  for (const handle of ['@mcp.alice', '@mcp.bob']) tokens[handle] = await op.agent(handle);
  tokens['@mcp.carol'] = await op.agent('@mcp.carol', { visibility: 'public' });
});
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => undefined);
  await op.close();
});

async function httpSession(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  clients.push(client);
  return client;
}

function stdioEnv(extra: Record<string, string>): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'roost-mcp-'));
  return { HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_STATE_HOME: join(dir, 'state'), ...extra };
}

async function stdioSession(handle: string): Promise<Client> {
  const client = new Client({ name: 'test', version: '1' });
  const env = stdioEnv({ ROOST_URL: op.url, ROOST_AGENT: handle, ROOST_TOKEN: tokens[handle] });
  await client.connect(
    new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp'], env, stderr: 'pipe' }),
  );
  clients.push(client);
  return client;
}

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult & { structuredContent: any }> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent: any };
}

const text = (result: CallToolResult) =>
  (result.content as Array<{ type: string; text: string }>).map((c) => c.text).join('\n');

describe('tools/list', () => {
  it('serves the same tool list over stdio and HTTP', async () => {
    const stdio = await stdioSession('@mcp.alice');
    const http = await httpSession(op.url, tokens['@mcp.bob']);
    const overStdio = (await stdio.listTools()).tools;
    const overHttp = (await http.listTools()).tools;
    expect(overStdio.map((t) => t.name).sort()).toEqual(EXPECTED_TOOLS);
    expect(overHttp).toEqual(overStdio);
    expect(stdio.getServerVersion()?.name).toBe('roost');
  });
});

describe('two sessions exchange a message, a receipt and a reply', () => {
  it('alice over stdio, bob over HTTP', async () => {
    const alice = await stdioSession('@mcp.alice');
    const bob = await httpSession(op.url, tokens['@mcp.bob']);

    const sent = await call(alice, 'send', { to: ['@mcp.bob'], subject: 'Deploy plan', text: 'Friday 10:00?' });
    expect(sent.isError).toBeFalsy();
    const id = sent.structuredContent.id as string;
    expect(text(sent)).toContain(`sent ${id}`);

    const inbox = await call(bob, 'inbox');
    expect(inbox.structuredContent.envelope_headers.map((h: { id: string }) => h.id)).toEqual([id]);
    expect(text(inbox)).toMatch(new RegExp(`${id.slice(-6)} \\d+s @mcp.alice "Deploy plan" text`));

    // peek leaves the envelope unread; read marks it.
    const peeked = await call(bob, 'read', { ids: [id.slice(-6)], peek: true });
    expect(text(peeked)).toContain('Friday 10:00?');
    expect((await call(bob, 'inbox')).structuredContent.envelope_headers).toHaveLength(1);
    const read = await call(bob, 'read', { ids: [id] });
    expect(read.structuredContent.envelopes[0].content_parts).toEqual([{ type: 'text', text: 'Friday 10:00?' }]);
    expect((await call(bob, 'inbox')).structuredContent.envelope_headers).toHaveLength(0);

    const receipt = await call(bob, 'receipt', { envelope_id: id, status: 'accepted', note: 'on it' });
    expect(receipt.structuredContent).toMatchObject({ envelope_id: id, status: 'accepted', from: '@mcp.bob' });
    const replied = await call(bob, 'reply', { in_reply_to: id.slice(-6), text: 'Yes, 10:00.' });
    expect(replied.isError).toBeFalsy();
    const replyId = replied.structuredContent.id as string;

    const status = await call(alice, 'status', { envelope_id: id });
    expect(status.structuredContent.recipients).toEqual([
      expect.objectContaining({ handle: '@mcp.bob', read: true, status: 'accepted' }),
    ]);
    expect(status.structuredContent.receipts).toEqual([
      expect.objectContaining({ from: '@mcp.bob', status: 'accepted', note: 'on it' }),
    ]);

    const aliceInbox = await call(alice, 'inbox');
    const headers = aliceInbox.structuredContent.envelope_headers as Array<{
      id: string;
      in_reply_to?: string;
      subject?: string;
      receipt?: unknown;
    }>;
    expect(headers.find((h) => h.id === replyId)).toMatchObject({ in_reply_to: id, subject: 'Re: Deploy plan' });
    expect(headers.some((h) => h.receipt !== undefined)).toBe(true);
    expect(text(aliceInbox)).toContain('rcpt:accepted');

    const marked = await call(alice, 'mark_read', { ids: headers.map((h) => h.id) });
    expect(marked.structuredContent.read).toHaveLength(headers.length);
  });

  it('search, agents and schedules', async () => {
    const alice = await httpSession(op.url, tokens['@mcp.alice']);
    await call(alice, 'send', { to: ['@mcp.carol'], subject: 'quarterly figures', text: 'the zebra report' });
    const found = await call(alice, 'search', { q: 'zebra' });
    expect(found.structuredContent.envelopes).toHaveLength(1);
    const shown = await call(alice, 'agents', { handle: '@mcp.carol' });
    expect(text(shown)).toContain('@mcp.carol');
    expect(shown.structuredContent.agent.canonical_handle).toBe('@mcp.carol');
    expect(text(await call(alice, 'agents', { q: 'carol' }))).toContain('@mcp.carol');

    const created = await call(alice, 'schedule', {
      action: 'create',
      to: ['@mcp.carol'],
      text: 'later',
      start_at: Date.now() + 3_600_000,
    });
    expect(created.isError).toBeFalsy();
    const listed = await call(alice, 'schedule', { action: 'list' });
    expect(listed.structuredContent.schedules.map((s: { id: string }) => s.id)).toContain(created.structuredContent.id);
    const cancelled = await call(alice, 'schedule', { action: 'cancel', id: created.structuredContent.id });
    expect(cancelled.structuredContent.status).toBe('cancelled');
  });
});

describe('wait_for_mail', () => {
  async function wakes(waiter: Client, sender: RoostClient, to: string): Promise<void> {
    const waiting = call(waiter, 'wait_for_mail', { timeout_ms: 20_000 });
    // Send once the wait is surely subscribed (a send before it would be missed by design).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const accepted = await sender.send({ to: [to], subject: 'wake up', content_parts: [{ type: 'text', text: 'x' }] });
    const woke = await waiting;
    expect(woke.isError).toBeFalsy();
    expect(woke.structuredContent.envelope_headers.map((h: { id: string }) => h.id)).toEqual([accepted.id]);
    expect(woke.structuredContent.next_cursor).toEqual({ created_at: accepted.created_at, envelope_id: accepted.id });
    // From that cursor, a second wait returns mail already there at once.
    const again = await sender.send({ to: [to], content_parts: [{ type: 'text', text: 'y' }] });
    const next = await call(waiter, 'wait_for_mail', {
      timeout_ms: 20_000,
      after_created_at: accepted.created_at,
      after_envelope_id: accepted.id,
    });
    expect(next.structuredContent.envelope_headers.map((h: { id: string }) => h.id)).toEqual([again.id]);
  }

  it('wakes over stdio (gateway WebSocket)', async () => {
    const sender = new RoostClient({ url: op.url, token: tokens['@mcp.alice'] });
    await wakes(await stdioSession('@mcp.carol'), sender, '@mcp.carol');
  });

  it('wakes over stdio and HTTP on an empty mailbox (no cursor to start from)', async () => {
    const sender = new RoostClient({ url: op.url, token: tokens['@mcp.alice'] });
    tokens['@mcp.erin'] = await op.agent('@mcp.erin');
    await wakes(await stdioSession('@mcp.erin'), sender, '@mcp.erin');
    tokens['@mcp.frank'] = await op.agent('@mcp.frank');
    await wakes(await httpSession(op.url, tokens['@mcp.frank']), sender, '@mcp.frank');
  });

  it('wakes over HTTP (in-process bus)', async () => {
    const sender = new RoostClient({ url: op.url, token: tokens['@mcp.alice'] });
    await wakes(await httpSession(op.url, tokens['@mcp.carol']), sender, '@mcp.carol');
  });

  it('wakes over HTTP on an api node fanned out through Redis Streams', async () => {
    const redisOp = await startOperator({ redis: true });
    try {
      const aliceToken = await redisOp.agent('@mcp.alice');
      const bobToken = await redisOp.agent('@mcp.bob');
      await wakes(
        await httpSession(redisOp.url, bobToken),
        new RoostClient({ url: redisOp.url, token: aliceToken }),
        '@mcp.bob',
      );
    } finally {
      await redisOp.close();
    }
  });

  it('times out with no new mail and the cursor it started from', async () => {
    const bob = await httpSession(op.url, tokens['@mcp.bob']);
    const result = await call(bob, 'wait_for_mail', { timeout_ms: 200 });
    expect(text(result)).toBe('no new mail');
    expect(result.structuredContent.envelope_headers).toEqual([]);
  });
});

describe('failures', () => {
  it('HTTP: a missing or unknown bearer is a 401 with the ASMTP body; GET is a 405', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    for (const authorization of [undefined, 'Bearer nope-not-a-token']) {
      const res = await fetch(`${op.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(init),
      });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
    }
    const get = await fetch(`${op.url}/mcp`, {
      headers: { authorization: `Bearer ${tokens['@mcp.bob']}`, accept: 'text/event-stream' },
    });
    expect(get.status).toBe(405);
    expect(((await get.json()) as { error: { code: string } }).error.code).toBe('METHOD_NOT_ALLOWED');
    // The SDK client sees the refusal too.
    await expect(httpSession(op.url, 'nope-not-a-token')).rejects.toThrow(/401|UNAUTHORIZED/);
  });

  it('stdio: no token configured fails clearly before serving', async () => {
    const home = cliHome();
    const result = await home.run(['mcp'], { env: { ROOST_URL: op.url, ROOST_AGENT: '@mcp.alice' } });
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('no token for @mcp.alice');
    expect(result.stdout).toBe('');
  });

  it('a revoked token is a tool error carrying UNAUTHORIZED and a hint', async () => {
    tokens['@mcp.dave'] = await op.agent('@mcp.dave');
    const dave = await stdioSession('@mcp.dave');
    const reply = await op.client.post('/_admin/agents/@mcp.dave/rotate-token', {}, op.adminToken);
    expect(reply.status).toBe(200);
    const result = await call(dave, 'inbox');
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/^UNAUTHORIZED: .*\nhint: /);
    expect(result.structuredContent.error.code).toBe('UNAUTHORIZED');
  });

  it('a refusal by the operator carries the ASMTP code', async () => {
    const alice = await httpSession(op.url, tokens['@mcp.alice']);
    const result = await call(alice, 'send', { to: ['@mcp.ghost'], text: 'hello?' });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/^NOT_FOUND: /);
  });

  it('bad arguments get a schema error and change nothing', async () => {
    for (const session of [await stdioSession('@mcp.alice'), await httpSession(op.url, tokens['@mcp.alice'])]) {
      const before = await new RoostClient({ url: op.url, token: tokens['@mcp.alice'] }).mailbox({
        direction: 'out',
        limit: 1000,
      });
      const bad = [
        { name: 'send', arguments: { to: '@mcp.bob', text: 'not an array' } },
        { name: 'send', arguments: { to: [], text: 'nobody' } },
        { name: 'receipt', arguments: { envelope_id: 'X', status: 'maybe' } },
        { name: 'inbox', arguments: { limit: 0 } },
      ];
      for (const request of bad) {
        const outcome = await session.callTool(request).then(
          (result) => text(result as CallToolResult),
          (error: Error) => error.message,
        );
        expect(outcome).toMatch(/validation|invalid/i);
      }
      const nothing = await call(session, 'send', { to: ['@mcp.bob'] });
      expect(text(nothing)).toMatch(/^INVALID_CONTENT: nothing to send/);
      const after = await new RoostClient({ url: op.url, token: tokens['@mcp.alice'] }).mailbox({
        direction: 'out',
        limit: 1000,
      });
      expect(after.envelope_headers).toEqual(before.envelope_headers);
    }
  });
});
