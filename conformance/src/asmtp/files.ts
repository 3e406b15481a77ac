import { caps } from '../caps';
import { eq, expectError, expectStatus, hasNoKey, ok } from '../assert';
import type { Agent, T } from '../runner';
import { ulid } from '#client';
import { envelope, MIB, multipart, PNG, type Part } from '../wire';
import { inbox } from './helpers';
import { item } from './item';

/** ASMTP.md §10 items 74–82: uploads (§7.1), single-use file_id claims (§7.2), downloads (§7.3). */

function post(t: T, agent: Agent, body: Buffer | string, contentType?: string) {
  return t.http.request('POST', '/files', {
    token: agent.token,
    body,
    headers: contentType === undefined ? {} : { 'content-type': contentType },
  });
}

async function upload(t: T, agent: Agent, part: Partial<Part> = {}): Promise<any> {
  const { body, contentType } = multipart([{ bytes: PNG, ...part }]);
  const reply = await post(t, agent, body, contentType);
  expectStatus(reply, 201, 'upload');
  return reply.body;
}

/** GET of a file as bytes. */
async function download(t: T, path: string, agent: Agent) {
  return t.http.get(path, agent.token);
}

const fileItem = (n: number, title: string, run: (t: T) => Promise<void>) =>
  item(n, title, async (t) => {
    await t.need(caps.files(t.run));
    await run(t);
  });

fileItem(
  74,
  'POST /files with a valid PNG multipart part named file returns 201 {id:"file_…", status:"ready", filename, content_type, size_bytes, created_at, expires_at>created_at}',
  async (t) => {
    const alice = await t.agent('alice');
    const { body, contentType } = multipart([
      { name: 'file', filename: 'x.png', contentType: 'image/png', bytes: PNG },
    ]);
    const reply = await post(t, alice, body, contentType);
    expectStatus(reply, 201);
    ok(/^file_/.test(reply.body.id), `id ${reply.body.id} does not start with file_`);
    eq(
      [reply.body.status, reply.body.filename, reply.body.content_type, reply.body.size_bytes],
      ['ready', 'x.png', 'image/png', PNG.length],
      'status, filename, content_type, size_bytes',
    );
    ok(reply.body.expires_at > reply.body.created_at, 'expires_at must be after created_at');
    hasNoKey(reply.body, 'url', 'the upload response');
  },
);

fileItem(
  75,
  'POST /files with a disallowed content type, an empty file, a >10 MiB file, or PNG type with non-PNG bytes returns 400 INVALID_FILE',
  async (t) => {
    const alice = await t.agent('alice');
    const cases: Array<[string, Part]> = [
      ['disallowed type', { contentType: 'text/html', bytes: Buffer.from('<p>') }],
      ['empty file', { contentType: 'text/plain', bytes: Buffer.alloc(0) }],
      ['10 MiB + 1', { contentType: 'application/octet-stream', bytes: Buffer.alloc(10 * MIB + 1, 7) }],
      ['PNG type, non-PNG bytes', { contentType: 'image/png', bytes: Buffer.from('not a png at all') }],
    ];
    for (const [label, part] of cases) {
      const { body, contentType } = multipart([part]);
      expectError(await post(t, alice, body, contentType), 400, 'INVALID_FILE', label);
    }
    eq(
      (await upload(t, alice, { contentType: 'text/plain', bytes: Buffer.from('x') })).size_bytes,
      1,
      'a one-byte text file (control)',
    );
  },
);

fileItem(
  76,
  'POST /files that is not multipart, or whose first part is not named file, returns 400 INVALID_REQUEST',
  async (t) => {
    const alice = await t.agent('alice');
    const good = multipart([{ bytes: PNG }], 'bnd');
    expectError(
      await post(t, alice, JSON.stringify({ file: 'x' }), 'application/json'),
      400,
      'INVALID_REQUEST',
      'a JSON body',
    );
    expectError(await post(t, alice, good.body, 'multipart/form-data'), 400, 'INVALID_REQUEST', 'no boundary');
    const renamed = multipart([{ name: 'upload', bytes: PNG }, { bytes: PNG }], 'bnd');
    expectError(
      await post(t, alice, renamed.body, renamed.contentType),
      400,
      'INVALID_REQUEST',
      'first part named upload',
    );
  },
);

fileItem(77, 'a pending file is downloadable by its uploader and returns 404 to anyone else', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const file = await upload(t, alice, { filename: 'x.png' });
  const own = await download(t, `/files/${file.id}`, alice);
  expectStatus(own, 200, 'the uploader');
  ok(own.bytes.equals(PNG), 'the downloaded bytes differ from the upload');
  expectError(await download(t, `/files/${file.id}`, bob), 404, 'NOT_FOUND', 'another agent');
  expectError(await download(t, `/files/file_${ulid()}`, alice), 404, 'NOT_FOUND', 'an unknown id');
});

fileItem(
  78,
  'an envelope with {type:"image", file_id} is accepted and its stored part has url and no file_id',
  async (t) => {
    const { alice, bob } = await t.agents('alice', 'bob');
    const file = await upload(t, alice);
    const body = envelope(bob.handle, { content_parts: [{ type: 'image', file_id: file.id, mime_type: 'image/png' }] });
    expectStatus(await t.send(alice, body), 202);
    const fetched = await t.http.get(`/messages/${body.id}`, bob.token);
    expectStatus(fetched, 200);
    const part = fetched.body.content_parts[0];
    hasNoKey(part, 'file_id', 'the stored part');
    ok(typeof part.url === 'string' && part.url.length > 0, 'the stored part has no url');
    eq([part.type, part.mime_type], ['image', 'image/png'], 'the other keys of the part');
  },
);

fileItem(
  79,
  'a recipient can GET /files/{id} for a file attached to an envelope it received; a non-party gets 404',
  async (t) => {
    const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
    const file = await upload(t, alice);
    const body = envelope(bob.handle, { content_parts: [{ type: 'file', file_id: file.id, name: 'x.png' }] });
    expectStatus(await t.send(alice, body), 202);
    const got = await download(t, `/files/${file.id}`, bob);
    expectStatus(got, 200, 'the recipient');
    ok(got.bytes.equals(PNG), 'the recipient got other bytes');
    expectError(await download(t, `/files/${file.id}`, carol), 404, 'NOT_FOUND', 'a non-party');
    const url = (await t.http.get(`/messages/${body.id}`, bob.token)).body.content_parts[0].url as string;
    if (url.startsWith(t.options.publicUrl))
      expectStatus(await download(t, url.slice(t.options.publicUrl.length), bob), 200, 'the stored url');
  },
);

fileItem(80, 'reusing a claimed file_id in a new envelope returns 400 INVALID_FILE and stores nothing', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const file = await upload(t, alice);
  const first = await t.sent(alice, envelope(bob.handle, { content_parts: [{ type: 'image', file_id: file.id }] }));
  const again = envelope(bob.handle, { content_parts: [{ type: 'image', file_id: file.id }] });
  expectError(await t.send(alice, again), 400, 'INVALID_FILE', 'reuse');
  const twice = await upload(t, alice);
  expectError(
    await t.send(
      alice,
      envelope(bob.handle, {
        content_parts: [
          { type: 'image', file_id: twice.id },
          { type: 'image', file_id: twice.id },
        ],
      }),
    ),
    400,
    'INVALID_FILE',
    'twice in one envelope',
  );
  eq(await inbox(t, bob), [first.id], 'bob’s in feed');
});

fileItem(81, 'using another agent’s file_id, or an unknown one, returns 400 INVALID_FILE', async (t) => {
  const { alice, bob, carol } = await t.agents('alice', 'bob', 'carol');
  const carols = await upload(t, carol);
  expectError(
    await t.send(alice, envelope(bob.handle, { content_parts: [{ type: 'image', file_id: carols.id }] })),
    400,
    'INVALID_FILE',
    'another agent’s file',
  );
  expectError(
    await t.send(alice, envelope(bob.handle, { content_parts: [{ type: 'file', file_id: `file_${ulid()}` }] })),
    400,
    'INVALID_FILE',
    'an unknown file',
  );
  eq(await inbox(t, bob), [], 'bob’s in feed');
  // Carol's file is still unclaimed: she can attach it.
  expectStatus(
    await t.send(carol, envelope(bob.handle, { content_parts: [{ type: 'image', file_id: carols.id }] })),
    202,
    'the owner attaches it',
  );
});

fileItem(82, 'the stored file url starts with the operator’s configured public base URL', async (t) => {
  const { alice, bob } = await t.agents('alice', 'bob');
  const file = await upload(t, alice);
  const body = envelope(bob.handle, { content_parts: [{ type: 'image', file_id: file.id }] });
  expectStatus(await t.send(alice, body), 202);
  const url = (await t.http.get(`/messages/${body.id}`, bob.token)).body.content_parts[0].url as string;
  ok(url.startsWith(`${t.options.publicUrl}/`), `the url ${url} does not start with ${t.options.publicUrl}/`);
});
