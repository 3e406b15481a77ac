import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RoostAdminClient, RoostClient, textPart } from '#client';
import { connect, type Listener } from '../support/ws';
import { DEPLOY } from './support';
import {
  HARDENED,
  docker,
  dockerOk,
  eventually,
  inspect,
  ok,
  publishedUrl,
  removeContainers,
  report,
  stop,
  testImage,
  uniqueName,
  untilHealthy,
} from './image-support';

// The built image (deploy/docker/Dockerfile) in Docker, run as production runs it: the embedded
// operator (`roost all`, PGlite in the /data volume) as uid 1000 on a read-only root filesystem
// with a tmpfs /tmp, through a published port.
const image = testImage();

describe('the image', () => {
  it("runs the Node major the Dockerfile's default base names (the suite runs on it too in CI)", async () => {
    const version = await dockerOk(['run', '--rm', image, 'node', '--version']);
    const dockerfile = readFileSync(join(DEPLOY, 'docker', 'Dockerfile'), 'utf8');
    const major = /^ARG NODE_IMAGE=node:(\d+)/m.exec(dockerfile)![1];
    expect(version).toMatch(new RegExp(`^v${major}\\.`));
    report(`node ${version}`);
  });

  it('holds production dependencies and the compiled code only, owned by root', async () => {
    const check = await docker([
      'run',
      '--rm',
      image,
      'sh',
      '-c',
      'test -f /app/dist/apps/roost/src/main.js && test -f /app/dist/console/index.html && test -d /app/node_modules/pg && test ! -e /app/node_modules/typescript ' +
        '&& test ! -e /app/node_modules/jest && test ! -e /app/node_modules/vite && test ! -e /app/node_modules/testcontainers && test ! -e /app/apps && stat -c %u /app/dist',
    ]);
    expect(check).toEqual(expect.objectContaining({ code: 0, stdout: '0' }));
    const [size, user] = (await dockerOk(['image', 'inspect', '--format', '{{.Size}} {{.Config.User}}', image])).split(
      ' ',
    );
    expect(user).toBe('1000:1000');
    report(`size ${Math.round(Number(size) / 1e6)} MB (${size} bytes)`);
  });
});

describe('the embedded operator (roost all) in a hardened container', () => {
  const name = uniqueName('embedded');
  const adminToken = 'image-test-admin-token-0123456789';
  let url: string;

  beforeAll(async () => {
    await dockerOk([
      'run',
      '--detach',
      '--name',
      name,
      ...HARDENED,
      '--publish',
      '127.0.0.1::8025',
      '--env',
      `ROOST_ADMIN_TOKEN=${adminToken}`,
      image,
    ]);
    url = await publishedUrl(name);
    await eventually(() => ok(`${url}/healthz`), 60_000, 'GET /healthz');
  });

  afterAll(async () => {
    const logs = await docker(['logs', '--tail', '30', name]);
    if (logs.code === 0 && expect.getState().assertionCalls === 0)
      report(`${name} logs:\n${logs.stdout}\n${logs.stderr}`);
    await removeContainers(name);
  });

  it('runs as uid 1000 on a read-only root filesystem, writing only /tmp and /data', async () => {
    expect(await inspect(name, '{{.HostConfig.ReadonlyRootfs}}')).toBe('true');
    expect(await dockerOk(['exec', name, 'id', '-u'])).toBe('1000');
    // PID 1 is node itself (the entrypoint execs it), as uid 1000: it gets SIGTERM from docker stop
    const status = await dockerOk(['exec', name, 'cat', '/proc/1/status']);
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe('1000');
    expect(await dockerOk(['exec', name, 'cat', '/proc/1/comm'])).toBe('node');
    const write = (path: string) => docker(['exec', name, 'sh', '-c', `echo x > ${path}`]);
    expect((await write('/app/x')).stderr).toMatch(/Read-only file system/);
    expect((await write('/x')).code).not.toBe(0);
    expect((await write('/tmp/x')).code).toBe(0);
    expect((await write('/data/x')).code).toBe(0);
  });

  it('serves /healthz, /readyz and a send and a receive through the published port', async () => {
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual(expect.objectContaining({ ok: true }));
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    const admin = new RoostAdminClient({ url, adminToken });
    const alice = new RoostClient({ url, token: (await admin.createAgent('@img.alice', { policy: 'open' })).token });
    const bob = new RoostClient({ url, token: (await admin.createAgent('@img.bob', { policy: 'open' })).token });
    const socket = await connect(url, { token: bob.token });
    try {
      const accepted = await alice.send({
        to: ['@img.bob'],
        subject: 'from the image',
        content_parts: [textPart('hello')],
      });
      await socket.until(() => socket.ids.includes(accepted.id), 10_000, 'the header frame');
      const page = await bob.mailbox({ unread: true });
      expect(page.envelope_headers.map((h) => h.id)).toEqual([accepted.id]);
      const stored = await bob.message(accepted.id);
      expect(stored).toEqual(
        expect.objectContaining({ id: accepted.id, from: '@img.alice', subject: 'from the image' }),
      );
      expect(stored.content_parts).toEqual([textPart('hello')]);
    } finally {
      socket.close();
    }
  });

  it("turns healthy by the image's own HEALTHCHECK", async () => {
    expect(await inspect(name, '{{json .Config.Healthcheck.Test}}')).toMatch(/\/healthz/);
    await untilHealthy(name);
  });

  it('drains on docker stop: open sockets get 1012, the process exits 0 on its own, well before SIGKILL', async () => {
    const token = (await new RoostAdminClient({ url, adminToken }).createAgent('@img.carol')).token;
    const socket: Listener = await connect(url, { token });
    const stopped = await stop(name, 30);
    await socket.untilClosed(5_000);
    expect(socket.closeCode).toBe(1012);
    expect(stopped).toEqual(expect.objectContaining({ exitCode: 0, oomKilled: false }));
    expect(stopped.ms).toBeLessThan(25_000); // SIGKILL would come at 30 s and exit 137
    const logs = await docker(['logs', name]);
    expect(`${logs.stdout}\n${logs.stderr}`).toMatch(/draining/);
    report(`docker stop (embedded, one open socket): ${stopped.ms} ms, exit ${stopped.exitCode}`);
  });
});
