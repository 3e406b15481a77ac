import { caps } from '../caps';
import { eq, expectStatus, Failure, keyOrder, ok, show } from '../assert';
import { test, type Agent, type T } from '../runner';
import { setTimeout as sleep } from 'node:timers/promises';
import { ulid } from '#client';
import { compareKeys } from '../util';
import {
  ACCEPTED_KEYS,
  ADMIN_AGENT_KEYS,
  BODY_KEYS,
  FACT_KEYS,
  FRAME_KEYS,
  LISTING_KEYS,
  multipart,
  PDF,
  PNG,
} from '../wire';
import { checkHeaders, checkNextCursor, CliHttp, cliErrorCode, USER_AGENT } from './cli';
import { CliListener } from './listen';

/**
 * The interop group: request by request, what the ASMTP CLI 0.3.7 sends (ASMTP.md §8.3), and
 * every response checked the way that CLI parses it (§6.3, §6.6, §8).
 */

const interop = (id: string, title: string, run: (t: T) => Promise<void>) =>
  test('interop', `interop.${id}`, title, run);

/** `robotnet admin agent create <handle> --inbound-policy open --local-admin-token <ADMIN>`. */
async function cliAgent(t: T, name: string): Promise<Agent> {
  const admin = new CliHttp(t.http, t.adminToken);
  const handle = `@${t.owner()}.${name}`;
  const body = await admin.ok('POST', '/_admin/agents', { handle, policy: 'open' });
  if (typeof body.token !== 'string') throw new Failure(`admin agent create: no token in ${show(body)}`);
  t.run.agents.set(handle, body.token);
  return { handle, token: body.token, owner: t.owner(), name };
}

/** `robotnet send …`: POST /files per --file then per --image, then POST /messages with the CLI's part order. */
async function cliSend(
  t: T,
  from: Agent,
  to: string,
  options: {
    text?: string[];
    cc?: string[];
    subject?: string;
    inReplyTo?: string;
    monitor?: string;
    data?: unknown[];
    files?: Array<{ name: string; mime: string; bytes: Buffer }>;
    images?: Array<{ name: string; mime: string; bytes: Buffer }>;
  } = {},
) {
  const cli = new CliHttp(t.http, from.token);
  const upload = async (file: { name: string; mime: string; bytes: Buffer }) => {
    const { body, contentType } = multipart([
      { name: 'file', filename: file.name, contentType: file.mime, bytes: file.bytes },
    ]);
    const reply = await cli.call('POST', '/files', body, { 'content-type': contentType });
    if (reply.status < 200 || reply.status > 299)
      throw new Failure(`send: POST /files → ${reply.status} ${show(reply.text, 200)}`);
    if (typeof reply.body?.id !== 'string') throw new Failure(`send: POST /files answered no id: ${show(reply.text)}`);
    return reply.body.id as string;
  };
  const parts: unknown[] = (options.text ?? ['hello']).map((text) => ({ type: 'text', text }));
  for (const file of options.files ?? [])
    parts.push({
      type: 'file',
      file_id: await upload(file),
      name: file.name,
      mime_type: file.mime,
      size: file.bytes.length,
    });
  for (const image of options.images ?? [])
    parts.push({ type: 'image', file_id: await upload(image), mime_type: image.mime });
  for (const data of options.data ?? []) parts.push({ type: 'data', data });
  const envelope: Record<string, unknown> = { id: ulid(), to: [to], date_ms: Date.now(), content_parts: parts };
  if (options.cc) envelope.cc = options.cc;
  if (options.subject !== undefined) envelope.subject = options.subject;
  if (options.inReplyTo) envelope.in_reply_to = options.inReplyTo;
  if (options.monitor) envelope.monitor = options.monitor;
  const reply = await cli.call('POST', '/messages', envelope);
  if (reply.status < 200 || reply.status > 299)
    throw new Failure(`send: POST /messages → ${reply.status} ${cliErrorCode(reply)}`);
  eq(reply.body.id, envelope.id, 'send --json: id');
  keyOrder(reply.body, ACCEPTED_KEYS, 'send --json (202)');
  return { envelope, accepted: reply.body as { id: string; created_at: number } };
}

/** `robotnet mailbox list [--direction d] [--unread] [--limit n] [--order o] [--after-created-at … --after-envelope-id …]`. */
async function cliList(
  t: T,
  agent: Agent,
  options: {
    direction?: string;
    unread?: boolean;
    limit?: number;
    order?: string;
    after?: { created_at: number; envelope_id: string };
  } = {},
) {
  const cli = new CliHttp(t.http, agent.token);
  let path = `/mailbox?order=${options.order ?? 'desc'}&limit=${options.limit ?? 20}`;
  if (options.unread) path += '&unread=true';
  if (options.after)
    path += `&after_created_at=${options.after.created_at}&after_envelope_id=${options.after.envelope_id}`;
  path += `&direction=${options.direction ?? 'in'}`;
  const reply = await cli.call('GET', path);
  if (reply.status < 200 || reply.status > 299)
    throw new Failure(`mailbox list: GET ${path} → ${reply.status} ${cliErrorCode(reply)}`);
  checkNextCursor(reply, `mailbox list GET ${path}`);
  checkHeaders(reply.body.envelope_headers, `mailbox list GET ${path}`);
  return reply.body as { envelope_headers: any[]; next_cursor: { created_at: number; envelope_id: string } | null };
}

interop(
  'provision',
  'admin agent create|list|show|set|rotate-token|remove: the /_admin/agents requests the CLI makes, with its headers',
  async (t) => {
    const admin = new CliHttp(t.http, t.adminToken);
    const handle = `@${t.owner()}.cli`;
    const created = await admin.ok('POST', '/_admin/agents', { handle, policy: 'open' });
    t.run.agents.set(handle, created.token);
    keyOrder(created, ADMIN_AGENT_KEYS, 'admin agent create');
    ok(typeof created.token === 'string' && created.token.length > 0, 'admin agent create: no token');
    const listed = await admin.ok('GET', '/_admin/agents');
    ok(
      listed.agents.some((a: { handle: string }) => a.handle === handle),
      'admin agent list: the new agent is missing',
    );
    for (const agent of listed.agents.filter((a: { handle: string }) => a.handle === handle))
      keyOrder(agent, ADMIN_AGENT_KEYS, 'admin agent list');
    const path = `/_admin/agents/${encodeURIComponent(handle)}`;
    const shown = await admin.ok('GET', path);
    keyOrder(shown, ADMIN_AGENT_KEYS, 'admin agent show');
    const set = await admin.ok('PATCH', path, { display_name: 'CLI agent', visibility: 'public' });
    eq([set.display_name, set.visibility], ['CLI agent', 'public'], 'admin agent set');
    const rotated = await admin.ok('POST', `${path}/rotate-token`);
    ok(typeof rotated.token === 'string' && rotated.token !== created.token, 'admin agent rotate-token: no new token');
    keyOrder(rotated, ADMIN_AGENT_KEYS, 'admin agent rotate-token');
    t.run.agents.set(handle, rotated.token);
    await new CliHttp(t.http, rotated.token).ok('GET', '/mailbox?order=desc&limit=20&direction=in');
    eq(await admin.ok('DELETE', path), null, 'admin agent remove (204 = empty)');
    const keys = admin.sent.map((sent) => sent.headers['idempotency-key']).filter((key) => key !== undefined);
    eq(new Set(keys).size, keys.length, 'a fresh Idempotency-Key per request');
    for (const sent of admin.sent) {
      eq(sent.headers['user-agent'], USER_AGENT, 'User-Agent');
      ok(
        ['POST', 'PATCH', 'DELETE'].includes(sent.method) === (sent.headers['idempotency-key'] !== undefined),
        `${sent.method}: Idempotency-Key only on POST/PATCH/DELETE`,
      );
    }
  },
);

interop('health', 'doctor and status: GET {url}/health answers 200 and GET {url} answers at all', async (t) => {
  const cli = new CliHttp(t.http, 'unused');
  const health = await cli.call('GET', '/health');
  expectStatus(health, 200, 'doctor (GET /health)');
  const root = await t.http.request('GET', '', { headers: { 'user-agent': USER_AGENT }, validate: false });
  ok(root.status >= 100, 'status: no HTTP answer on GET {url}');
});

interop(
  'send-text',
  'send --text --cc --subject --json: POST /messages with a client ULID, 2xx and the 202 body in reference key order',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const carol = await cliAgent(t, 'carol');
    const { envelope, accepted } = await cliSend(t, alice, bob.handle, {
      text: ['hello'],
      cc: [carol.handle],
      subject: 'hi',
    });
    eq(
      Object.keys(envelope),
      ['id', 'to', 'date_ms', 'content_parts', 'cc', 'subject'],
      'the request body the CLI sends',
    );
    eq(accepted.id, envelope.id, 'accepted id');
    const shown = await new CliHttp(t.http, bob.token).ok('GET', `/messages?ids=${envelope.id}`);
    eq(shown.envelopes.length, 1, 'mailbox show');
    keyOrder(shown.envelopes[0], BODY_KEYS, 'mailbox show body');
    eq(shown.envelopes[0].from, alice.handle, 'from');
  },
);

interop(
  'send-files-data',
  'send --text --file --image --data: POST /files each, then one POST /messages with text, file, image, data parts in that order; the recipient downloads the url',
  async (t) => {
    await t.need(caps.files(t.run));
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const { envelope } = await cliSend(t, alice, bob.handle, {
      text: ['see attached'],
      files: [{ name: 'report.pdf', mime: 'application/pdf', bytes: PDF }],
      images: [{ name: 'p.png', mime: 'image/png', bytes: PNG }],
      data: [{ k: 1 }],
    });
    const posted = envelope.content_parts as any[];
    eq(
      posted.map((p) => p.type),
      ['text', 'file', 'image', 'data'],
      'the CLI’s part order',
    );
    const bobCli = new CliHttp(t.http, bob.token);
    const shown = await bobCli.ok('GET', `/messages?ids=${envelope.id}`);
    const stored = shown.envelopes[0].content_parts as any[];
    eq(
      stored.map((p) => p.type),
      ['text', 'file', 'image', 'data'],
      'stored part order',
    );
    eq(
      { ...stored[1], url: undefined },
      { type: 'file', name: 'report.pdf', mime_type: 'application/pdf', size: PDF.length, url: undefined },
      'the stored file part',
    );
    eq(
      { ...stored[2], url: undefined },
      { type: 'image', mime_type: 'image/png', url: undefined },
      'the stored image part',
    );
    eq(stored[3], { type: 'data', data: { k: 1 } }, 'the stored data part');
    // `files download <url>`: the bearer goes only to URLs under the configured url.
    for (const [part, bytes] of [
      [stored[1], PDF],
      [stored[2], PNG],
    ] as const) {
      const url = part.url as string;
      ok(
        typeof url === 'string' && url.startsWith(`${t.options.publicUrl}/`),
        `files download: url ${url} is not under ${t.options.publicUrl}, so the CLI would not send its bearer`,
      );
      const reply = await bobCli.call('GET', url.slice(t.options.publicUrl.length));
      expectStatus(reply, 200, `files download ${url}`);
      ok(reply.bytes.equals(bytes), `files download ${url}: other bytes`);
    }
    const header = (await cliList(t, bob)).envelope_headers.find((h) => h.id === envelope.id);
    eq(header?.type_hint, 'mixed', 'type_hint of the listing');
  },
);

interop(
  'mailbox-list-in',
  'mailbox list (--unread, --after-*, --order, --limit): GET /mailbox?order=desc&limit=20[…]&direction=in',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const sent = [];
    for (let i = 0; i < 4; i++) sent.push((await cliSend(t, alice, bob.handle, { subject: `n${i}` })).accepted);
    const newestFirst = [...sent].sort((a, b) => compareKeys(b, a)).map((s) => s.id);
    const listed = await cliList(t, bob);
    eq(
      listed.envelope_headers.map((h) => h.id),
      newestFirst,
      'mailbox list (desc)',
    );
    eq(listed.next_cursor, null, 'next_cursor of a short page');
    await new CliHttp(t.http, bob.token).ok('GET', `/messages?ids=${newestFirst[0]}`);
    eq(
      (await cliList(t, bob, { unread: true })).envelope_headers.map((h) => h.id),
      newestFirst.slice(1),
      'mailbox list --unread',
    );
    const after = { created_at: listed.envelope_headers[1].created_at, envelope_id: listed.envelope_headers[1].id };
    eq(
      (await cliList(t, bob, { after })).envelope_headers.map((h) => h.id),
      newestFirst.slice(2),
      'mailbox list --after-created-at --after-envelope-id (desc)',
    );
    const page = await cliList(t, bob, { order: 'asc', limit: 2 });
    eq(
      page.envelope_headers.map((h) => h.id),
      [...newestFirst].reverse().slice(0, 2),
      'mailbox list --order asc --limit 2',
    );
    eq(
      page.next_cursor,
      { created_at: page.envelope_headers[1].created_at, envelope_id: page.envelope_headers[1].id },
      'next_cursor of a full page',
    );
    for (const header of listed.envelope_headers) {
      ok(!('direction' in header) && !('unread' in header), `the in feed carries direction/unread: ${show(header)}`);
    }
  },
);

interop(
  'mailbox-list-out',
  'mailbox list --direction out: GET /mailbox?order=desc&limit=20&direction=out',
  async (t) => {
    await t.need(caps.outFeed(t.run));
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const toBob = (await cliSend(t, alice, bob.handle)).accepted;
    const toSelf = (await cliSend(t, alice, alice.handle)).accepted;
    await cliSend(t, bob, alice.handle);
    const listed = await cliList(t, alice, { direction: 'out' });
    eq(
      listed.envelope_headers.map((h) => [h.id, h.direction]),
      [
        [toSelf.id, 'self'],
        [toBob.id, 'out'],
      ],
      'the out feed',
    );
  },
);

interop(
  'mailbox-list-both',
  'mailbox list --direction both: GET /mailbox?order=desc&limit=20&direction=both',
  async (t) => {
    await t.need(caps.outFeed(t.run));
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const out = (await cliSend(t, alice, bob.handle)).accepted;
    const inbound = (await cliSend(t, bob, alice.handle)).accepted;
    const listed = await cliList(t, alice, { direction: 'both' });
    eq(
      listed.envelope_headers.map((h) => [h.id, h.direction, h.unread]),
      [
        [inbound.id, 'in', true],
        [out.id, 'out', undefined],
      ],
      'the both feed',
    );
  },
);

interop(
  'mailbox-show',
  'mailbox show <id> <id> <unknown>: always the batch GET /messages?ids=…; omitted ids are "not found or not entitled"; shown ones are read',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const a = (await cliSend(t, alice, bob.handle, { subject: 'a' })).accepted;
    const b = (await cliSend(t, alice, bob.handle, { subject: 'b' })).accepted;
    const c = (await cliSend(t, alice, bob.handle, { subject: 'c' })).accepted;
    const unknown = ulid();
    const cli = new CliHttp(t.http, bob.token);
    const shown = await cli.ok('GET', `/messages?ids=${b.id},${a.id},${unknown}`);
    eq(
      shown.envelopes.map((e: { id: string }) => e.id),
      [b.id, a.id],
      'shown envelopes',
    );
    const missing = [b.id, a.id, unknown].filter((id) => !shown.envelopes.some((e: { id: string }) => e.id === id));
    eq(missing, [unknown], 'reported as not found or not entitled');
    for (const body of shown.envelopes) keyOrder(body, BODY_KEYS, 'mailbox show body');
    eq(
      (await cliList(t, bob, { unread: true })).envelope_headers.map((h) => h.id),
      [c.id],
      'unread after show',
    );
  },
);

interop('mark-read', 'mailbox mark-read <id>…: POST /mailbox/read {"ids":[…]}, prints read.length', async (t) => {
  const alice = await cliAgent(t, 'alice');
  const bob = await cliAgent(t, 'bob');
  const a = (await cliSend(t, alice, bob.handle)).accepted;
  const b = (await cliSend(t, alice, bob.handle)).accepted;
  const cli = new CliHttp(t.http, bob.token);
  const result = await cli.ok('POST', '/mailbox/read', { ids: [a.id, b.id] });
  ok(Array.isArray(result.read), `mark-read: read is not an array: ${show(result)}`);
  eq([...result.read].sort(), [a.id, b.id].sort(), 'read');
  eq((await cliList(t, bob, { unread: true })).envelope_headers, [], 'unread after mark-read');
  const again = await cli.ok('POST', '/mailbox/read', { ids: [a.id] });
  ok(Array.isArray(again.read), 'mark-read again: read is not an array');
});

interop(
  'listen',
  'listen: catch-up on open, live frames, then after a disconnect a watermark catch-up (§6.6) that prints every envelope exactly once',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const ids: string[] = [];
    const send = async () => ids.push((await cliSend(t, alice, bob.handle)).accepted.id);
    await send();
    await send();
    const listener = new CliListener(t.options.url, t.http, bob.token);
    t.track(await listener.connect('listen #1'));
    eq(listener.printedIds, ids, 'printed by the first catch-up');
    await sleep(t.options.wsSettleMs);
    await send();
    await listener.socket!.notifyOf(ids[2], t.options.frameTimeoutMs);
    listener.check();
    eq(listener.printedIds, ids, 'printed after a live frame');
    ok(
      listener.stdout[2] === listener.socket!.raw.find((raw) => raw.includes(ids[2])),
      'a live frame is printed as its raw text',
    );
    listener.disconnect();
    for (let i = 0; i < 3; i++) await send();
    const watermark = listener.saved!;
    t.track(await listener.connect('listen #2'));
    const resumed = listener.catchUps[1];
    eq(
      resumed[0],
      `/mailbox?order=asc&limit=1000&after_created_at=${watermark.last_seen_created_at}&after_envelope_id=${watermark.last_seen_envelope_id}`,
      'the catch-up request after reconnecting',
    );
    eq(resumed.length, 1, 'catch-up requests after reconnecting (next_cursor null on a short page)');
    eq(listener.printedIds, ids, 'printed after the reconnect catch-up');
    await sleep(t.options.wsSettleMs);
    await send();
    await listener.socket!.notifyOf(ids[6], t.options.frameTimeoutMs);
    await t.quiet();
    listener.check();
    eq(listener.printedIds, ids, 'every envelope printed exactly once, in order');
    const last = listener.printed[listener.printed.length - 1];
    eq(
      [listener.saved!.last_seen_created_at, listener.saved!.last_seen_envelope_id],
      [last.created_at, last.id],
      'the watermark',
    );
    eq(listener.stderr, [], 'listen diagnostics');
  },
);

interop(
  'listen-monitor',
  'listen prints monitor.fact frames without moving the watermark; send --monitor --in-reply-to is accepted',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const first = (await cliSend(t, bob, alice.handle)).accepted;
    const listener = new CliListener(t.options.url, t.http, alice.token);
    t.track(await listener.connect('listen (sender)'));
    const before = structuredClone(listener.saved);
    await sleep(t.options.wsSettleMs);
    const reply = (await cliSend(t, alice, bob.handle, { monitor: 'mon_cli', inReplyTo: first.id })).accepted;
    await listener.socket!.until(
      () => listener.socket!.facts.length >= 1,
      t.options.frameTimeoutMs,
      'the monitor fact',
    );
    await t.quiet();
    listener.check();
    const facts = listener.printed.filter((o) => o.op === 'monitor.fact');
    eq(facts.length, 1, 'printed monitor facts');
    eq([facts[0].envelope_id, facts[0].recipient_handle, facts[0].fact], [reply.id, bob.handle, 'stored'], 'the fact');
    keyOrder(facts[0], FACT_KEYS, 'monitor.fact');
    eq(listener.saved, before, 'the watermark after a monitor fact');
  },
);

interop(
  'errors',
  'errors the CLI keys on: error.code with the HTTP status (401, 404 on send, 400 on a bad id, 409)',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const cli = new CliHttp(t.http, alice.token);
    const cases: Array<[number, string, Promise<any>]> = [
      [
        401,
        'UNAUTHORIZED',
        new CliHttp(t.http, `nope-${ulid()}`).call('GET', '/mailbox?order=desc&limit=20&direction=in'),
      ],
      [
        404,
        'NOT_FOUND',
        cli.call('POST', '/messages', {
          id: ulid(),
          to: [`@${t.owner()}.nobody`],
          date_ms: Date.now(),
          content_parts: [{ type: 'text', text: 'x' }],
        }),
      ],
      [400, 'INVALID_ENVELOPE_ID', cli.call('GET', '/messages?ids=nope')],
    ];
    for (const [status, code, pending] of cases) {
      const reply = await pending;
      eq([reply.status, cliErrorCode(reply)], [status, code], `${reply.method} ${reply.path}`);
    }
    const { envelope } = await cliSend(t, alice, bob.handle);
    const conflict = await cli.call('POST', '/messages', { ...envelope, subject: 'changed' });
    eq([conflict.status, cliErrorCode(conflict)], [409, 'RETRY_MISMATCH'], 'a retry with another body');
  },
);

interop(
  'key-order',
  'reference key orders: listing headers (§3.5) and push frames (§6.3) differ; stored bodies, the 202, monitor facts',
  async (t) => {
    const alice = await cliAgent(t, 'alice');
    const bob = await cliAgent(t, 'bob');
    const carol = await cliAgent(t, 'carol');
    const socket = await t.listen(bob, { headers: { 'user-agent': USER_AGENT } });
    const parent = ulid();
    const { envelope } = await cliSend(t, alice, bob.handle, {
      cc: [carol.handle],
      subject: 's',
      inReplyTo: parent,
      monitor: 'mon_order',
      text: ['a', 'b'],
    });
    const frame = await socket.notifyOf(envelope.id as string, t.options.frameTimeoutMs);
    eq(Object.keys(frame), [...FRAME_KEYS], 'push frame keys (§6.3)');
    const row = (await cliList(t, bob)).envelope_headers.find((h) => h.id === envelope.id);
    eq(
      Object.keys(row),
      LISTING_KEYS.filter((key) => key !== 'direction' && key !== 'unread'),
      'listing header keys (§3.5)',
    );
    if ((await caps.outFeed(t.run)) === null) {
      const sent = (await cliList(t, alice, { direction: 'both' })).envelope_headers.find((h) => h.id === envelope.id);
      eq(
        Object.keys(sent),
        LISTING_KEYS.filter((key) => key !== 'unread'),
        'listing header keys, direction=both',
      );
    }
    const body = (await new CliHttp(t.http, bob.token).ok('GET', `/messages?ids=${envelope.id}`)).envelopes[0];
    eq(
      Object.keys(body),
      ['id', 'from', 'to', 'date_ms', 'content_parts', 'cc', 'subject', 'in_reply_to', 'monitor'],
      'stored body keys',
    );
  },
);
