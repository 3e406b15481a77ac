import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readJson, saveProfile, storeAdminToken, userConfigFile, type UserConfig } from '../config';
import type { Session } from '../session';

export interface ServeOptions {
  port?: string;
  host?: string;
  dataDir?: string;
}

/**
 * The embedded all-in-one operator (`ROOST_ROLE=all`, PGlite without DATABASE_URL), built by the
 * same code as `npm start`. Nest and the database drivers load only here, never on other commands.
 */
export async function serve(session: Session, options: ServeOptions): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports -- Nest and the drivers load only for `serve` */
  const { loadConfig } = require('#config') as typeof import('#config');
  const { buildRoostApp, DRAIN_HOLD_OPEN_MS, ensureAdminToken } = require('#roost') as typeof import('#roost');
  const env = { ...process.env };
  if (options.port) env.PORT = options.port;
  if (options.host) env.ROOST_HOST = options.host;
  if (options.dataDir) env.ROOST_DATA_DIR = options.dataDir;
  // A local operator on a laptop: /metrics on its one port unless a metrics port is asked for.
  if (!env.ROOST_METRICS_PORT) env.ROOST_METRICS_PORT = '0';
  let config = loadConfig(env);
  let shown: string | undefined;
  config = ensureAdminToken(config, (token, file) => {
    shown = token;
    process.stdout.write(`\nRoost operator admin token (shown once, stored in ${file}):\n\n  ${token}\n\n`);
  });
  const adminToken = shown ?? env.ROOST_ADMIN_TOKEN ?? readEmbeddedToken(config.dataDir);
  const roost = await buildRoostApp(config);
  let draining = false;
  const drain = () => {
    if (draining) process.exit(1);
    draining = true;
    roost.drainSockets();
    roost.drain.begin(DRAIN_HOLD_OPEN_MS);
    const deadline = setTimeout(() => process.exit(1), config.http.shutdownTimeoutMs);
    deadline.unref();
    void roost.drain
      .settled()
      .then(() => roost.app.close())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on('SIGTERM', drain);
  process.on('SIGINT', drain);
  await roost.listen();
  const address = roost.app.getHttpServer().address() as { port: number } | null;
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${address?.port ?? config.port}`;
  // Point the profile at this operator (when it points nowhere yet) and keep its admin token.
  const profile = readJson<UserConfig>(userConfigFile())?.profiles?.[session.ctx.profile];
  if (!profile?.url) saveProfile(session.ctx.profile, { url }, false);
  if (adminToken && (!profile?.url || profile.url === url)) storeAdminToken(session.ctx.profile, adminToken);
  const where = config.databaseUrl === null ? `embedded PGlite in ${config.dataDir}` : 'Postgres';
  process.stderr.write(`Roost ${config.version} listening on ${url} — ${where} (profile ${session.ctx.profile})\n`);
}

function readEmbeddedToken(dataDir: string): string | undefined {
  try {
    return readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
  } catch {
    return undefined;
  }
}
