import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

/**
 * The image tier (test/deploy/image*.test.ts) runs the built image in the machine's Docker with the
 * docker CLI and testcontainers. ROOST_TEST_IMAGE names the image (.ci/docker.sh builds it).
 */
export function testImage(): string {
  const image = process.env.ROOST_TEST_IMAGE;
  if (!image) throw new Error('ROOST_TEST_IMAGE is not set: build deploy/docker/Dockerfile and name the image');
  return image;
}

const run = promisify(execFile);

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** `docker <args>`; resolves with the exit code (never rejects on a non-zero one). */
export async function docker(args: string[], timeoutMs = 120_000): Promise<Result> {
  try {
    const { stdout, stderr } = await run('docker', args, {
      encoding: 'utf8',
      timeout: timeoutMs,
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, stdout: stdout.trim(), stderr: stderr.trim() };
  } catch (error) {
    const e = error as { code?: number | string; stdout?: string; stderr?: string; message: string };
    if (typeof e.code !== 'number') throw new Error(`docker ${args.join(' ')}: ${e.message}`, { cause: error });
    return { code: e.code, stdout: (e.stdout ?? '').trim(), stderr: (e.stderr ?? '').trim() };
  }
}

/** `docker <args>`, failing with docker's stderr on a non-zero exit; stdout. */
export async function dockerOk(args: string[], timeoutMs?: number): Promise<string> {
  const result = await docker(args, timeoutMs);
  if (result.code !== 0)
    throw new Error(`docker ${args.join(' ')} exited ${result.code}: ${result.stderr || result.stdout}`);
  return result.stdout;
}

export const uniqueName = (what: string): string => `roost-it-${what}-${randomBytes(4).toString('hex')}`;

/** The production-like flags: read-only root filesystem, a small tmpfs /tmp, no new privileges. */
export const HARDENED = [
  '--read-only',
  '--tmpfs',
  '/tmp:rw,noexec,nosuid,size=64m',
  '--security-opt',
  'no-new-privileges',
];

/** `http://127.0.0.1:<host port>` for a container port published with `-p 127.0.0.1::<port>`. */
export async function publishedUrl(container: string, port = 8025): Promise<string> {
  const line = (await dockerOk(['port', container, `${port}/tcp`])).split('\n')[0];
  const hostPort = /:(\d+)$/.exec(line)?.[1];
  if (!hostPort) throw new Error(`docker port ${container} ${port}: ${line}`);
  return `http://127.0.0.1:${hostPort}`;
}

export async function inspect(container: string, format: string): Promise<string> {
  return dockerOk(['inspect', '--format', format, container]);
}

/** Poll `probe` every 250 ms until it returns a value that is not undefined. */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last instanceof Error ? last.message : JSON.stringify(last)}` : ''}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** 200 from `GET <url>` (no keep-alive, so a stopping server is not held open by the test). */
export async function ok(url: string): Promise<true | undefined> {
  // Bounded: a request sent while the container's network is still coming up can stall in
  // docker-proxy for minutes (SYN retries to the container), far past any poll's deadline.
  const response = await fetch(url, { headers: { connection: 'close' }, signal: AbortSignal.timeout(5_000) });
  await response.arrayBuffer();
  return response.status === 200 ? true : undefined;
}

/** HEALTHCHECK status ('starting', 'healthy', 'unhealthy'). */
export const health = (container: string): Promise<string> => inspect(container, '{{.State.Health.Status}}');

export async function untilHealthy(container: string, timeoutMs = 150_000): Promise<void> {
  await eventually(
    async () => ((await health(container)) === 'healthy' ? true : undefined),
    timeoutMs,
    `${container} healthy`,
  );
}

/** `docker stop` (SIGTERM, SIGKILL after `grace` s): how long it took and how the process ended. */
export async function stop(
  container: string,
  grace = 30,
): Promise<{ ms: number; exitCode: number; oomKilled: boolean }> {
  const started = Date.now();
  await dockerOk(['stop', '--time', String(grace), container], (grace + 30) * 1000);
  const ms = Date.now() - started;
  const [exitCode, oomKilled] = (await inspect(container, '{{.State.ExitCode}} {{.State.OOMKilled}}')).split(' ');
  return { ms, exitCode: Number(exitCode), oomKilled: oomKilled === 'true' };
}

/** Remove containers (and their anonymous volumes) whatever their state. */
export async function removeContainers(...names: string[]): Promise<void> {
  const existing = names.filter(Boolean);
  if (existing.length > 0) await docker(['rm', '--force', '--volumes', ...existing]);
}

/** One line on the run's output (figures CI reports: image size, stop time). */
export function report(line: string): void {
  process.stderr.write(`image tier: ${line}\n`);
}
