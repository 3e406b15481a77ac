import { closeSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';

/**
 * A cross-process lock: a lock file created with O_EXCL holding `pid time`. A lock whose process is
 * gone, or older than `staleMs`, is stale and taken over (renamed away first, so two takers cannot
 * both win).
 */
export interface LockOptions {
  staleMs?: number;
  timeoutMs?: number;
  retryMs?: number;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The lock file's content when it is stale, else undefined. */
function staleContent(file: string, staleMs: number): string | undefined {
  try {
    const content = readFileSync(file, 'utf8');
    const [pid, at] = content.trim().split(' ').map(Number);
    if (Number.isInteger(pid) && pid > 0 && !alive(pid)) return content;
    const since = Number.isFinite(at) ? at : statSync(file).mtimeMs;
    return Date.now() - since > staleMs ? content : undefined;
  } catch {
    return undefined;
  }
}

function tryAcquire(file: string): boolean {
  try {
    const fd = openSync(file, 'wx', 0o600);
    writeSync(fd, `${process.pid} ${Date.now()}\n`);
    closeSync(fd);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

export async function withLock<T>(file: string, task: () => Promise<T>, options: LockOptions = {}): Promise<T> {
  const staleMs = options.staleMs ?? 60_000;
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (tryAcquire(file)) break;
    const stale = staleContent(file, staleMs);
    if (stale !== undefined) {
      const aside = `${file}.stale.${process.pid}.${Date.now()}`;
      try {
        renameSync(file, aside);
        // Between our check and the rename another process may have taken over: put its lock back.
        if (readFileSync(aside, 'utf8') !== stale) renameSync(aside, file);
        else unlinkSync(aside);
      } catch {
        // someone else took it over first
      }
      continue;
    }
    if (Date.now() > deadline)
      throw new Error(`${file} is held by another process (remove it if no roost mirror is running)`);
    await new Promise((resolve) => setTimeout(resolve, (options.retryMs ?? 25) * (1 + Math.random())));
  }
  try {
    return await task();
  } finally {
    try {
      unlinkSync(file);
    } catch {
      // already gone
    }
  }
}
