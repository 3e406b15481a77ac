import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

/**
 * Where the CLI finds its operator, identity and tokens. Only node:fs and node:path here: `roost hook`
 * loads this on its fast path.
 *
 * Precedence, highest first: flags (`--profile --url --as --token --admin-token`), environment
 * (`ROOST_PROFILE ROOST_URL ROOST_AGENT ROOST_TOKEN ROOST_ADMIN_TOKEN`), the nearest
 * `.roost/config.json` walking up from the working directory, the user config
 * (`$XDG_CONFIG_HOME/roost/config.json`), built-in defaults.
 */

export const DEFAULT_URL = 'http://127.0.0.1:8025';
export const DEFAULT_PROFILE = 'default';

export interface ProfileConfig {
  url?: string;
  agent?: string;
}

/** `$XDG_CONFIG_HOME/roost/config.json`. */
export interface UserConfig {
  default_profile?: string;
  profiles?: Record<string, ProfileConfig>;
}

/** `.roost/config.json`: per-directory defaults (never tokens: the folder may be committed). */
export interface DirConfig {
  profile?: string;
  url?: string;
  agent?: string;
}

/** `$XDG_CONFIG_HOME/roost/credentials.json`, mode 0600. */
export interface Credentials {
  profiles?: Record<string, { admin_token?: string; agents?: Record<string, string> }>;
}

export interface Flags {
  profile?: string;
  url?: string;
  as?: string;
  token?: string;
  adminToken?: string;
}

export interface Context {
  profile: string;
  url: string;
  agent: string | undefined;
  token: string | undefined;
  adminToken: string | undefined;
  /** Where each value came from, for `doctor` and error hints. */
  sources: { url: string; agent: string; token: string; adminToken: string };
  /** The folder holding the nearest `.roost/` (the worktree root), if any. */
  root: string | undefined;
  configDir: string;
  stateDir: string;
}

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'roost');
}

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'roost');
}

export const userConfigFile = (env?: NodeJS.ProcessEnv) => join(configDir(env), 'config.json');
export const credentialsFile = (env?: NodeJS.ProcessEnv) => join(configDir(env), 'credentials.json');

export function readJson<T>(file: string): T | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ConfigFileError(file);
  }
}

export class ConfigFileError extends Error {
  constructor(readonly file: string) {
    super(`${file} is not valid JSON`);
  }
}

/** The nearest folder at or above `from` holding `.roost/` (stops at the home folder's parent and `/`). */
export function findRoot(from: string = process.cwd()): string | undefined {
  let dir = resolve(from);
  for (;;) {
    if (existsSync(join(dir, '.roost', 'config.json')) || existsSync(join(dir, '.roost', 'mailbox'))) return dir;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** Write JSON atomically (temp + rename) with `mode`; the folder is created 0700. */
export function writeJsonAtomic(file: string, value: unknown, mode = 0o600): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(value, null, 2)}\n`, { mode });
  chmodSync(temp, mode);
  renameSync(temp, file);
}

export function resolveContext(flags: Flags = {}, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Context {
  const root = findRoot(cwd);
  const dir = root ? (readJson<DirConfig>(join(root, '.roost', 'config.json')) ?? {}) : {};
  const user = readJson<UserConfig>(userConfigFile(env)) ?? {};
  const profile = flags.profile ?? env.ROOST_PROFILE ?? dir.profile ?? user.default_profile ?? DEFAULT_PROFILE;
  const saved = user.profiles?.[profile] ?? {};
  const creds = readJson<Credentials>(credentialsFile(env))?.profiles?.[profile] ?? {};

  const pick = <T>(...candidates: Array<[T | undefined, string]>): [T | undefined, string] =>
    candidates.find(([value]) => value !== undefined && value !== '') ?? [undefined, 'none'];

  const [url, urlSource] = pick<string>(
    [flags.url, '--url'],
    [env.ROOST_URL, 'ROOST_URL'],
    [dir.url, '.roost/config.json'],
    [saved.url, `profile ${profile}`],
    [DEFAULT_URL, 'default'],
  );
  const [agent, agentSource] = pick<string>(
    [flags.as, '--as'],
    [env.ROOST_AGENT, 'ROOST_AGENT'],
    [dir.agent, '.roost/config.json'],
    [saved.agent, `profile ${profile}`],
  );
  const [token, tokenSource] = pick<string>(
    [flags.token, '--token'],
    [env.ROOST_TOKEN, 'ROOST_TOKEN'],
    [agent ? creds.agents?.[agent] : undefined, 'credentials'],
  );
  const embedded = root ? readAdminTokenFile(join(root, '.roost', 'admin-token')) : undefined;
  const [adminToken, adminSource] = pick<string>(
    [flags.adminToken, '--admin-token'],
    [env.ROOST_ADMIN_TOKEN, 'ROOST_ADMIN_TOKEN'],
    [creds.admin_token, 'credentials'],
    [embedded, '.roost/admin-token'],
  );
  return {
    profile,
    url: normalizeUrl(url!),
    agent,
    token,
    adminToken,
    sources: { url: urlSource, agent: agentSource, token: tokenSource, adminToken: adminSource },
    root,
    configDir: configDir(env),
    stateDir: stateDir(env),
  };
}

/**
 * `localhost:8025` and `127.0.0.1:8025/v1` mean http; a trailing slash is dropped (the CLI appends
 * paths). Anything else is returned as given, and the session reports it.
 */
export function normalizeUrl(url: string): string {
  let text = url.trim();
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text) && /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d+)?(\/|$)/i.test(text))
    text = `http://${text}`;
  return text.replace(/\/+$/, '');
}

function readAdminTokenFile(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Store an agent token (0600). The token is never printed by the CLI after this. */
export function storeAgentToken(profile: string, handle: string, token: string, env?: NodeJS.ProcessEnv): string {
  const file = credentialsFile(env);
  const creds = readJson<Credentials>(file) ?? {};
  const entry = ((creds.profiles ??= {})[profile] ??= {});
  (entry.agents ??= {})[handle] = token;
  writeJsonAtomic(file, creds);
  return file;
}

export function forgetAgentToken(profile: string, handle: string, env?: NodeJS.ProcessEnv): void {
  const file = credentialsFile(env);
  const creds = readJson<Credentials>(file);
  const agents = creds?.profiles?.[profile]?.agents;
  if (!agents || !(handle in agents)) return;
  delete agents[handle];
  writeJsonAtomic(file, creds);
}

export function storeAdminToken(profile: string, token: string, env?: NodeJS.ProcessEnv): string {
  const file = credentialsFile(env);
  const creds = readJson<Credentials>(file) ?? {};
  ((creds.profiles ??= {})[profile] ??= {}).admin_token = token;
  writeJsonAtomic(file, creds);
  return file;
}

/** Create or update a profile in the user config (mode 0600: it names operators and agents). */
export function saveProfile(
  profile: string,
  fields: ProfileConfig,
  makeDefault: boolean,
  env?: NodeJS.ProcessEnv,
): string {
  const file = userConfigFile(env);
  const user = readJson<UserConfig>(file) ?? {};
  const current = ((user.profiles ??= {})[profile] ??= {});
  for (const [key, value] of Object.entries(fields))
    if (value !== undefined) (current as Record<string, unknown>)[key] = value;
  if (makeDefault || user.default_profile === undefined) user.default_profile = profile;
  writeJsonAtomic(file, user);
  return file;
}

/** Write `.roost/config.json` in `dir` (merging). */
export function saveDirConfig(dir: string, fields: DirConfig): string {
  const file = join(dir, '.roost', 'config.json');
  const current = readJson<DirConfig>(file) ?? {};
  for (const [key, value] of Object.entries(fields))
    if (value !== undefined) (current as Record<string, unknown>)[key] = value;
  writeJsonAtomic(file, current, 0o644);
  return file;
}

/** Group- or world-readable? (tokens must be 0600). */
export function tooOpen(file: string): boolean {
  try {
    return (statSync(file).mode & 0o077) !== 0;
  } catch {
    return false;
  }
}
