import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The compiled CLI (`npm run build`), run as a real process with its own XDG folders. */
export const CLI = resolve(__dirname, '../../../dist/apps/cli/src/main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliHome {
  dir: string;
  env: Record<string, string>;
  /** Run `roost …` in `cwd` (default: a folder with no `.roost/` above it). */
  run(args: string[], options?: { cwd?: string; input?: string; env?: Record<string, string> }): Promise<CliResult>;
  /** Run and expect exit 0; returns stdout. */
  ok(args: string[], options?: { cwd?: string; input?: string; env?: Record<string, string> }): Promise<string>;
  json<T = Record<string, unknown>>(args: string[], options?: { cwd?: string; input?: string }): Promise<T>;
  spawn(args: string[], options?: { cwd?: string }): ChildProcess;
}

/** A fresh home: `$XDG_CONFIG_HOME` and `$XDG_STATE_HOME` in a temp folder, nothing inherited but PATH. */
export function cliHome(base: Record<string, string> = {}): CliHome {
  const dir = mkdtempSync(join(tmpdir(), 'roost-cli-'));
  const work = join(dir, 'work');
  mkdirSync(work);
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: dir,
    XDG_CONFIG_HOME: join(dir, 'config'),
    XDG_STATE_HOME: join(dir, 'state'),
    ...base,
  };
  const home: CliHome = {
    dir,
    env,
    run(args, options = {}) {
      return new Promise((done, fail) => {
        const child = spawn(process.execPath, [CLI, ...args], {
          cwd: options.cwd ?? work,
          env: { ...env, ...options.env },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.on('error', fail);
        child.on('close', (code) => done({ code, stdout, stderr }));
        child.stdin.end(options.input ?? '');
      });
    },
    async ok(args, options) {
      const result = await home.run(args, options);
      if (result.code !== 0)
        throw new Error(`roost ${args.join(' ')} exited ${result.code}\n${result.stdout}\n${result.stderr}`);
      return result.stdout;
    },
    async json(args, options) {
      return JSON.parse(await home.ok([...args, '--json'], options));
    },
    spawn(args, options = {}) {
      return spawn(process.execPath, [CLI, ...args], {
        cwd: options.cwd ?? work,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    },
  };
  return home;
}

export { until } from '../../support/until';
