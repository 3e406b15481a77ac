import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { saveDirConfig, saveProfile, storeAdminToken, storeAgentToken } from '../config';
import { CliError, EXIT } from '../output';
import type { Session } from '../session';

function stdinToken(what: string): string {
  let text = '';
  try {
    text = readFileSync(0, 'utf8').trim();
  } catch {
    // no stdin
  }
  if (!text)
    throw new CliError(
      `no ${what} on standard input`,
      EXIT.USAGE,
      `pipe it in, e.g. \`roost config token @a.b < token.txt\``,
      'NO_INPUT',
    );
  return text;
}

export function show(session: Session): void {
  const { ctx } = session;
  const view = {
    profile: ctx.profile,
    url: ctx.url,
    agent: ctx.agent ?? null,
    token: ctx.token ? `set (${ctx.sources.token})` : null,
    admin_token: ctx.adminToken ? `set (${ctx.sources.adminToken})` : null,
    sources: { url: ctx.sources.url, agent: ctx.sources.agent },
    folder: ctx.root ?? null,
    config_dir: ctx.configDir,
    state_dir: ctx.stateDir,
  };
  session.print.out(
    () =>
      Object.entries(view)
        .map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`)
        .join('\n'),
    view,
  );
}

export function profile(
  session: Session,
  name: string,
  options: { url?: string; agent?: string; default?: boolean },
): void {
  // `--url` is also a global option; commander hands it to whichever level parsed it.
  const url = options.url ?? session.options.url;
  const file = saveProfile(
    name,
    { url: url?.replace(/\/+$/, ''), agent: options.agent ?? session.options.as },
    options.default === true,
  );
  session.print.out(`saved profile ${name} in ${file}`, { profile: name, file });
}

export function use(session: Session, handle: string, options: { dir?: string; profile?: string; url?: string }): void {
  const file = saveDirConfig(resolve(options.dir ?? process.cwd()), {
    agent: handle,
    profile: options.profile,
    url: options.url,
  });
  session.print.out(`${handle} is the default agent under ${resolve(options.dir ?? process.cwd())} (${file})`, {
    agent: handle,
    file,
  });
}

export function token(session: Session, handle: string): void {
  const file = storeAgentToken(session.ctx.profile, handle, stdinToken('token'));
  session.print.out(`stored the token of ${handle} (profile ${session.ctx.profile}) in ${file}`, {
    agent: handle,
    file,
  });
}

export function adminToken(session: Session): void {
  const file = storeAdminToken(session.ctx.profile, stdinToken('admin token'));
  session.print.out(`stored the admin token (profile ${session.ctx.profile}) in ${file}`, { file });
}
