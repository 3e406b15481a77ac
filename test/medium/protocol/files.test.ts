import { ulid } from '#domain';
import { envelope, startOperator, type TestOperator } from '../../support/operator';

/** A real 1×1 PNG; its signature `89 50 4E 47 0D 0A 1A 0A` holds a CRLF, as multipart parsing must tolerate. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const MIB = 1024 * 1024;

interface Part {
  name?: string;
  filename?: string | null;
  contentType?: string | null;
  bytes: Buffer;
}

/** A multipart/form-data body built by hand: boundary, Content-Disposition, part Content-Type, bytes. */
function multipart(parts: Part[], boundary = `roost-${ulid()}`): { body: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name ?? 'file'}"`;
    if (part.filename !== null) head += `; filename="${part.filename ?? 'x.png'}"`;
    head += '\r\n';
    if (part.contentType !== null) head += `Content-Type: ${part.contentType ?? 'image/png'}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`, 'utf8'), part.bytes, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/**
 * ASMTP.md §10 items 74–82: uploads (§7.1), single-use `file_id` claims (§7.2) and downloads by
 * the parties of the bound envelope (§7.3), with the url on Roost's configured public base.
 */
describe('files', () => {
  let op: TestOperator;
  let owners = 0;

  beforeAll(async () => {
    op = await startOperator();
  });
  afterAll(async () => op?.close());

  /** Fresh agents (policy open) under an owner no other test uses. */
  const agents = <N extends string>(...names: N[]) => op.agents(`files${++owners}`, ...names);

  function post(token: string, body: Buffer | string, contentType?: string) {
    return op.client.request('POST', '/files', {
      token,
      body,
      headers: contentType === undefined ? {} : { 'content-type': contentType },
    });
  }

  async function upload(token: string, part: Partial<Part> = {}): Promise<any> {
    const { body, contentType } = multipart([{ bytes: PNG, ...part }]);
    const reply = await post(token, body, contentType);
    expect(reply.status).toBe(201);
    return reply.body;
  }

  /** GET a file path as raw bytes (the schema-checking client decodes bodies as text). */
  async function download(path: string, token: string) {
    const response = await fetch(op.url + path, { headers: { authorization: `Bearer ${token}` } });
    return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
  }

  async function expectNotFound(path: string, token: string): Promise<void> {
    const reply = await op.client.get(path, token);
    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });
  }

  function expectError(reply: { status: number; body: any }, status: number, code: string): void {
    expect({ status: reply.status, code: reply.body?.error?.code }).toEqual({ status, code });
  }

  async function unread(token: string): Promise<string[]> {
    const reply = await op.client.get('/mailbox?unread=true', token);
    return reply.body.envelope_headers.map((h: { id: string }) => h.id);
  }

  it('#74 POST /files with a PNG part named file returns 201 {id: file_…, status: ready, …, expires_at > created_at}', async () => {
    const { alice } = await agents('alice');
    const before = Date.now();
    const { body, contentType } = multipart([
      { name: 'file', filename: 'x.png', contentType: 'image/png', bytes: PNG },
    ]);
    const reply = await post(alice.token, body, contentType);
    expect(reply.status).toBe(201);
    expect(reply.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(reply.body).toEqual({
      id: expect.stringMatching(/^file_[0-9A-Za-z_-]+$/),
      status: 'ready',
      filename: 'x.png',
      content_type: 'image/png',
      size_bytes: PNG.length,
      created_at: expect.any(Number),
      expires_at: expect.any(Number),
    });
    expect(reply.body.created_at).toBeGreaterThanOrEqual(before);
    expect(reply.body.expires_at).toBeGreaterThan(reply.body.created_at);
    expect(reply.body).not.toHaveProperty('url');

    // Variants the reference also takes: quoted boundary, case-insensitive type, type parameters, extra parts.
    const quoted = multipart(
      [
        { bytes: PNG, contentType: 'IMAGE/PNG; x=1' },
        { name: 'note', filename: null, contentType: null, bytes: Buffer.from('hi') },
      ],
      'q b',
    );
    const second = await post(alice.token, quoted.body, 'Multipart/Form-Data; boundary="q b"');
    expect(second.status).toBe(201);
    expect(second.body.content_type).toBe('image/png');
    expect(second.body.id).not.toBe(reply.body.id);

    // Filenames are sanitised: basename, outer dots trimmed, odd runs replaced.
    expect((await upload(alice.token, { filename: '../dir/..my pic (1)ü.png' })).filename).toBe('my pic _1_.png');
    expect((await upload(alice.token, { filename: '...' })).filename).toBe('file');
  });

  it('#75 a disallowed type, an empty file, a file over 10 MiB, or PNG type with non-PNG bytes returns 400 INVALID_FILE', async () => {
    const { alice } = await agents('alice');
    const cases: Part[] = [
      { contentType: 'image/svg+xml', bytes: Buffer.from('<svg/>') },
      { contentType: 'text/html', bytes: Buffer.from('<p>') },
      { contentType: 'application/zip', bytes: Buffer.from('PK') },
      { contentType: 'text/plain', bytes: Buffer.alloc(0) },
      { contentType: 'image/png', bytes: Buffer.alloc(0) },
      { contentType: 'application/octet-stream', bytes: Buffer.alloc(10 * MIB + 1, 7) },
      { contentType: 'image/png', bytes: Buffer.from('not a png at all') },
      { contentType: 'image/png', bytes: PNG.subarray(0, 7) },
      { contentType: 'image/jpeg', bytes: PNG },
      { contentType: 'image/gif', bytes: Buffer.from('GIF88a....') },
      { contentType: 'application/pdf', bytes: Buffer.from('%PDF') },
    ];
    for (const part of cases) {
      const { body, contentType } = multipart([part]);
      const reply = await post(alice.token, body, contentType);
      expect({
        type: part.contentType,
        size: part.bytes.length,
        status: reply.status,
        code: reply.body?.error?.code,
      }).toEqual({
        type: part.contentType,
        size: part.bytes.length,
        status: 400,
        code: 'INVALID_FILE',
      });
    }
    // A body far past the cap is refused the same way, not with a dropped socket.
    const huge = multipart([{ contentType: 'application/octet-stream', bytes: Buffer.alloc(12 * MIB, 1) }]);
    expectError(await post(alice.token, huge.body, huge.contentType), 400, 'INVALID_FILE');

    // The limits are inclusive: exactly 10 MiB, and one byte, are fine; other types are not sniffed.
    const max = await upload(alice.token, {
      contentType: 'application/octet-stream',
      bytes: Buffer.alloc(10 * MIB, 2),
    });
    expect(max.size_bytes).toBe(10 * MIB);
    expect((await upload(alice.token, { contentType: 'text/plain', bytes: Buffer.from('x') })).size_bytes).toBe(1);
    expect((await upload(alice.token, { contentType: 'application/json', bytes: PNG })).content_type).toBe(
      'application/json',
    );
    expect((await upload(alice.token, { contentType: 'image/gif', bytes: Buffer.from('GIF89a rest') })).status).toBe(
      'ready',
    );
  });

  it('#76 POST /files that is not multipart, or whose first part is not named file, returns 400 INVALID_REQUEST', async () => {
    const { alice } = await agents('alice');
    const good = multipart([{ bytes: PNG }], 'bnd');
    const requests: Array<[string, Buffer | string, string | undefined]> = [
      ['json body', JSON.stringify({ file: 'x' }), 'application/json'],
      ['no content type', good.body, undefined],
      ['form-urlencoded', 'file=x', 'application/x-www-form-urlencoded'],
      ['no boundary', good.body, 'multipart/form-data'],
      ['wrong boundary', good.body, 'multipart/form-data; boundary=other'],
      [
        'first part named upload',
        multipart([{ name: 'upload', bytes: PNG }, { bytes: PNG }], 'bnd').body,
        good.contentType,
      ],
      ['no filename', multipart([{ filename: null, bytes: PNG }], 'bnd').body, good.contentType],
      ['no part content type', multipart([{ contentType: null, bytes: PNG }], 'bnd').body, good.contentType],
      ['no closing boundary', good.body.subarray(0, good.body.length - 9), good.contentType],
      ['empty body', Buffer.alloc(0), good.contentType],
    ];
    for (const [label, body, contentType] of requests) {
      const reply = await post(alice.token, body, contentType);
      expect({ label, status: reply.status, code: reply.body?.error?.code }).toEqual({
        label,
        status: 400,
        code: 'INVALID_REQUEST',
      });
    }
    // Authentication comes first.
    expectError(
      await op.client.request('POST', '/files', { body: good.body, headers: { 'content-type': good.contentType } }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('#77 a pending file is downloadable by its uploader and 404 to anyone else', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    const file = await upload(alice.token, { filename: 'x.png' });

    const own = await download(`/files/${file.id}`, alice.token);
    expect(own.status).toBe(200);
    expect(own.bytes.equals(PNG)).toBe(true);
    expect(own.headers.get('content-type')).toBe('image/png');
    expect(own.headers.get('content-length')).toBe(String(PNG.length));
    expect(own.headers.get('content-disposition')).toBe('attachment; filename="x.png"');

    await expectNotFound(`/files/${file.id}`, bob.token);
    await expectNotFound(`/files/file_${ulid()}`, alice.token);
    await expectNotFound('/files/nope', alice.token);
    expectError(await op.client.get(`/files/${file.id}`), 401, 'UNAUTHORIZED');
  });

  it('#78 an envelope with {type: image, file_id} is accepted and its stored part has url and no file_id', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    const image = await upload(alice.token);
    const doc = await upload(alice.token, {
      filename: 'notes.txt',
      contentType: 'text/plain',
      bytes: Buffer.from('notes'),
    });
    const body = envelope(bob.handle, {
      content_parts: [
        { type: 'image', file_id: image.id, mime_type: 'image/png' },
        { type: 'file', name: 'notes.txt', file_id: doc.id, mime_type: 'text/plain', size: 5 },
        { type: 'text', text: 'two files' },
      ],
    });
    const sent = await op.client.post('/messages', body, alice.token);
    expect(sent.status).toBe(202);

    const stored = await op.client.get(`/messages/${body.id}`, bob.token);
    expect(stored.status).toBe(200);
    const [imagePart, filePart, textPart] = stored.body.content_parts;
    expect(imagePart).toEqual({ type: 'image', mime_type: 'image/png', url: `${op.url}/files/${image.id}` });
    expect(Object.keys(imagePart)).toEqual(['type', 'mime_type', 'url']);
    expect(filePart).toEqual({
      type: 'file',
      name: 'notes.txt',
      mime_type: 'text/plain',
      size: 5,
      url: `${op.url}/files/${doc.id}`,
    });
    expect(Object.keys(filePart)).toEqual(['type', 'name', 'mime_type', 'size', 'url']);
    expect(textPart).toEqual({ type: 'text', text: 'two files' });
    expect(stored.text).not.toContain('file_id');
    const header = (await op.client.get('/mailbox', bob.token)).body.envelope_headers[0];
    expect(header).toMatchObject({ id: body.id, type_hint: 'mixed' });
  });

  it('#79 a recipient can GET /files/{id} of a file on an envelope it received; a non-party gets 404', async () => {
    const { alice, bob, carol, mallory } = await agents('alice', 'bob', 'carol', 'mallory');
    const file = await upload(alice.token, { filename: 'photo.png' });
    const id = (
      await op.client.post(
        '/messages',
        envelope(bob.handle, { cc: [carol.handle], content_parts: [{ type: 'image', file_id: file.id }] }),
        alice.token,
      )
    ).body.id as string;

    for (const party of [bob, carol, alice]) {
      const reply = await download(`/files/${file.id}`, party.token);
      expect(reply.status).toBe(200);
      expect(reply.bytes.equals(PNG)).toBe(true);
      expect(reply.headers.get('content-type')).toBe('image/png');
      expect(reply.headers.get('content-disposition')).toBe('attachment; filename="photo.png"');
    }
    await expectNotFound(`/files/${file.id}`, mallory.token);
    // Downloading is not reading.
    expect(await unread(bob.token)).toEqual([id]);
    expect(await unread(carol.token)).toEqual([id]);
  });

  it('#80 reusing a claimed file_id returns 400 INVALID_FILE and stores nothing', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    const file = await upload(alice.token);
    const first = envelope(bob.handle, { content_parts: [{ type: 'image', file_id: file.id }] });
    expect((await op.client.post('/messages', first, alice.token)).status).toBe(202);

    const reuse = envelope(carol.handle, { content_parts: [{ type: 'image', file_id: file.id }] });
    expectError(await op.client.post('/messages', reuse, alice.token), 400, 'INVALID_FILE');
    expect(await unread(carol.token)).toEqual([]);
    expect((await op.client.get(`/messages/${reuse.id}`, alice.token)).status).toBe(404);
    await expectNotFound(`/files/${file.id}`, carol.token);
    // The refused id was not consumed: it can still be used for a fresh upload.
    const fresh = await upload(alice.token);
    const retry = { ...reuse, content_parts: [{ type: 'image', file_id: fresh.id }] };
    expect((await op.client.post('/messages', retry, alice.token)).status).toBe(202);
    expect(await unread(carol.token)).toEqual([reuse.id]);

    // An idempotent replay of the first envelope is not a second claim.
    const replay = await op.client.post('/messages', first, alice.token);
    expect(replay.status).toBe(202);
    expect(await unread(bob.token)).toEqual([first.id]);

    // The same pending file twice in one envelope also fails, and rolls back its claim.
    const twice = await upload(alice.token);
    const doubled = envelope(bob.handle, {
      content_parts: [
        { type: 'image', file_id: twice.id },
        { type: 'file', file_id: twice.id },
      ],
    });
    expectError(await op.client.post('/messages', doubled, alice.token), 400, 'INVALID_FILE');
    expect(await unread(bob.token)).toEqual([first.id]);
    const single = envelope(bob.handle, { content_parts: [{ type: 'image', file_id: twice.id }] });
    expect((await op.client.post('/messages', single, alice.token)).status).toBe(202);
  });

  it('#81 another agent’s file_id, or an unknown one, returns 400 INVALID_FILE and stores nothing', async () => {
    const { alice, bob, carol } = await agents('alice', 'bob', 'carol');
    const bobs = await upload(bob.token);
    const foreign = envelope(carol.handle, { content_parts: [{ type: 'image', file_id: bobs.id }] });
    const unknown = envelope(carol.handle, { content_parts: [{ type: 'file', file_id: `file_${ulid()}` }] });
    const junk = envelope(carol.handle, { content_parts: [{ type: 'file', file_id: 'nope' }] });
    for (const body of [foreign, unknown, junk]) {
      expectError(await op.client.post('/messages', body, alice.token), 400, 'INVALID_FILE');
    }
    expect(await unread(carol.token)).toEqual([]);
    await expectNotFound(`/files/${bobs.id}`, carol.token);
    await expectNotFound(`/files/${bobs.id}`, alice.token);

    // Recipient refusals still come first and look the same as ever.
    const nowhere = envelope('@files-nobody.x', { content_parts: [{ type: 'image', file_id: bobs.id }] });
    const refused = await op.client.post('/messages', nowhere, alice.token);
    expect(refused.status).toBe(404);
    expect(refused.body).toEqual({ error: { code: 'NOT_FOUND', message: 'not found' } });

    // Bob's file is still pending and his to use.
    const own = envelope(carol.handle, { content_parts: [{ type: 'image', file_id: bobs.id }] });
    expect((await op.client.post('/messages', own, bob.token)).status).toBe(202);
    expect((await download(`/files/${bobs.id}`, carol.token)).status).toBe(200);
  });

  it('#82 the stored file url starts with the operator’s configured public base URL', async () => {
    const { alice, bob } = await agents('alice', 'bob');
    expect(op.config.publicUrl).toBe(op.url);
    const file = await upload(alice.token);
    const body = envelope(bob.handle, { content_parts: [{ type: 'image', file_id: file.id }] });
    await op.client.post('/messages', body, alice.token);
    const url: string = (await op.client.get(`/messages/${body.id}`, bob.token)).body.content_parts[0].url;
    expect(url.startsWith(`${op.config.publicUrl}/`)).toBe(true);
    expect(url).toBe(`${op.url}/files/${encodeURIComponent(file.id)}`);
    // The url works as is for a recipient with its bearer.
    const response = await fetch(url, { headers: { authorization: `Bearer ${bob.token}` } });
    expect(response.status).toBe(200);
    expect(Buffer.from(await response.arrayBuffer()).equals(PNG)).toBe(true);

    // The configured base is what counts, not the address the operator listens on.
    const original = op.config.publicUrl;
    op.config.publicUrl = 'https://roost.example.test/v1';
    try {
      const other = await upload(alice.token);
      const later = envelope(bob.handle, { content_parts: [{ type: 'file', file_id: other.id }] });
      expect((await op.client.post('/messages', later, alice.token)).status).toBe(202);
      const stored = await op.client.get(`/messages/${later.id}`, bob.token);
      expect(stored.body.content_parts[0].url).toBe(`https://roost.example.test/v1/files/${other.id}`);
    } finally {
      op.config.publicUrl = original;
    }
  });
});
