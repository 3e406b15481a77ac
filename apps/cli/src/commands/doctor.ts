import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import WebSocket from 'ws';
import { RoostAdminClient, RoostClient } from '#client';
import { credentialsFile, tooOpen } from '../config';
import { isRoostHookCommand, shellSplit } from '../install';
import { CliError, EXIT, toCliError } from '../output';
import { USER_AGENT, type Session } from '../session';

interface Check {
  name: string;
  ok: boolean;
  detail: string;
  hint?: string;
  exit?: number;
}

/** Probe `/connect` with a cursor past everything: a resuming operator answers `replay.complete` at once. */
function probePush(url: string, token: string): Promise<{ ok: boolean; resume: boolean; detail: string }> {
  return new Promise((resolve) => {
    const ws = new URL(`${url}/connect`);
    ws.protocol = ws.protocol === 'https:' ? 'wss:' : 'ws:';
    ws.searchParams.set('after_created_at', String(Number.MAX_SAFE_INTEGER));
    ws.searchParams.set('after_envelope_id', '01ZZZZZZZZZZZZZZZZZZZZZZZZ');
    const socket = new WebSocket(ws, { headers: { authorization: `Bearer ${token}` }, handshakeTimeout: 5000 });
    let opened = false;
    const finish = (result: { ok: boolean; resume: boolean; detail: string }) => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => undefined);
      socket.terminate();
      resolve(result);
    };
    const timer = setTimeout(
      () =>
        finish({
          ok: opened,
          resume: false,
          detail: opened ? 'push connected; no server-side resume (plain ASMTP: catch-up over REST)' : 'no answer',
        }),
      2000,
    );
    socket.on('open', () => (opened = true));
    socket.on('message', (data: WebSocket.RawData) => {
      try {
        if ((JSON.parse((data as Buffer).toString()) as { op?: string }).op === 'replay.complete')
          finish({ ok: true, resume: true, detail: 'push connected; server-side resume offered' });
      } catch {
        // ignore
      }
    });
    socket.on('unexpected-response', (_req, res) =>
      finish({ ok: false, resume: false, detail: `handshake refused with HTTP ${res.statusCode}` }),
    );
    socket.on('error', (error) => finish({ ok: false, resume: false, detail: error.message }));
  });
}

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Where a command word resolves: absolute as is, else the first executable on PATH. */
function resolveCommand(word: string, path = process.env.PATH ?? ''): string | undefined {
  if (isAbsolute(word) || word.includes('/')) return executable(word) ? word : undefined;
  return path
    .split(delimiter)
    .filter(Boolean)
    .map((dir) => join(dir, word))
    .find(executable);
}

/**
 * The hook commands `roost install` wrote in this worktree must start without help from the
 * harness's PATH: a harness that cannot find `roost` runs the hook, fails, and says nothing.
 */
export function hookChecks(root: string): Check[] {
  const checks: Check[] = [];
  for (const rel of ['.claude/settings.json', '.codex/hooks.json']) {
    const file = join(root, rel);
    if (!existsSync(file)) continue;
    let commands: string[];
    try {
      const hooks =
        (
          JSON.parse(readFileSync(file, 'utf8')) as {
            hooks?: Record<string, Array<{ hooks?: Array<{ command?: unknown }> }>>;
          }
        ).hooks ?? {};
      commands = Object.values(hooks)
        .flatMap((groups) =>
          (Array.isArray(groups) ? groups : []).flatMap((g) => (g.hooks ?? []).map((h) => h.command)),
        )
        .filter(isRoostHookCommand) as string[];
    } catch {
      checks.push({
        name: 'hooks',
        ok: false,
        detail: `${rel} is not valid JSON`,
        hint: 'fix it by hand, then rerun `roost install`',
        exit: EXIT.CONFIG,
      });
      continue;
    }
    for (const command of new Set(commands)) {
      let words: string[];
      try {
        words = shellSplit(command);
      } catch {
        words = [];
      }
      const [exe, script] = words;
      const found = exe ? resolveCommand(exe) : undefined;
      const scriptOk = !script || script === 'hook' || existsSync(script);
      let problem: string | undefined;
      if (!found) problem = `${exe ?? command} is not ${exe && !exe.includes('/') ? 'on PATH' : 'an executable file'}`;
      else if (!scriptOk) problem = `${script} does not exist`;
      if (problem) {
        checks.push({
          name: 'hooks',
          ok: false,
          detail: `${rel}: \`${command}\`: ${problem}`,
          hint: 'rerun `roost install` (it writes absolute paths)',
          exit: EXIT.CONFIG,
        });
        break;
      }
      const viaPath = !isAbsolute(exe);
      checks.push({
        name: 'hooks',
        ok: true,
        detail: `${rel} runs ${found}${viaPath ? ' (found on this PATH; a harness with another PATH may not find it: rerun `roost install` for absolute paths)' : ''}`,
      });
      break;
    }
  }
  return checks;
}

export async function doctor(session: Session): Promise<void> {
  const { ctx } = session;
  const checks: Check[] = [];
  const add = (check: Check) => checks.push(check);
  add({
    name: 'profile',
    ok: true,
    detail: `${ctx.profile}; url ${ctx.url} (from ${ctx.sources.url})${ctx.root ? `; folder defaults ${ctx.root}/.roost/config.json` : ''}`,
  });
  const creds = credentialsFile();
  if (ctx.root) for (const check of hookChecks(ctx.root)) add(check);
  if (tooOpen(creds))
    add({
      name: 'credentials',
      ok: false,
      detail: `${creds} is readable by others`,
      hint: `chmod 600 ${creds}`,
      exit: EXIT.CONFIG,
    });

  let reachable = false;
  try {
    const health = await new RoostClient({ url: ctx.url, token: '', userAgent: USER_AGENT }).health();
    reachable = true;
    add({
      name: 'operator',
      ok: true,
      detail: `${ctx.url} answers: ${health.network} ${health.version}, up ${Math.round(health.uptime_ms / 1000)} s`,
    });
  } catch (error) {
    const failure = toCliError(error, session.where);
    add({ name: 'operator', ok: false, detail: failure.message, hint: failure.hint, exit: failure.exitCode });
  }

  if (!ctx.agent) {
    add({
      name: 'agent',
      ok: false,
      detail: 'no agent selected',
      hint: 'pass --as @owner.name or run `roost config use @owner.name`',
      exit: EXIT.CONFIG,
    });
  } else if (!ctx.token) {
    add({
      name: 'token',
      ok: false,
      detail: `no token for ${ctx.agent} in profile ${ctx.profile}`,
      hint: `\`roost admin agent create ${ctx.agent}\` or \`roost config token ${ctx.agent}\``,
      exit: EXIT.CONFIG,
    });
  } else if (reachable) {
    try {
      const me = await session.client().me();
      const same = me.canonical_handle === ctx.agent;
      add({
        name: 'token',
        ok: same,
        detail: same
          ? `accepted for ${ctx.agent} (from ${ctx.sources.token}; policy ${me.inbound_policy})`
          : `the token belongs to ${me.canonical_handle}, not ${ctx.agent}`,
        hint: same ? undefined : `store the right token with \`roost config token ${ctx.agent}\``,
        exit: same ? undefined : EXIT.CONFIG,
      });
      if (same) {
        const push = await probePush(ctx.url, ctx.token);
        add({ name: 'push', ok: push.ok, detail: push.detail, exit: push.ok ? undefined : EXIT.UNREACHABLE });
      }
    } catch (error) {
      const failure = toCliError(error, session.where);
      add({ name: 'token', ok: false, detail: failure.message, hint: failure.hint, exit: failure.exitCode });
    }
  }

  if (ctx.adminToken && reachable) {
    try {
      await new RoostAdminClient({ url: ctx.url, adminToken: ctx.adminToken, userAgent: USER_AGENT }).agents();
      add({ name: 'admin', ok: true, detail: `admin token accepted (from ${ctx.sources.adminToken})` });
    } catch (error) {
      const failure = toCliError(error, { ...session.where, admin: true });
      add({ name: 'admin', ok: false, detail: failure.message, hint: failure.hint, exit: failure.exitCode });
    }
  }

  session.print.out(
    () =>
      checks
        .map(
          (c) => `${c.ok ? 'ok  ' : 'FAIL'} ${c.name.padEnd(11)} ${c.detail}${c.hint ? `\n     hint: ${c.hint}` : ''}`,
        )
        .join('\n'),
    { ok: checks.every((c) => c.ok), checks },
  );
  const failed = checks.find((c) => !c.ok);
  if (failed) throw new CliError(`doctor: ${failed.name} failed`, failed.exit ?? EXIT.FAILURE, undefined, 'DOCTOR');
}
