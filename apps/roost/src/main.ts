import { ConfigError, loadConfig, type Config } from '#config';
import { ensureAdminToken } from './admin-token';
import { buildRoostApp, DRAIN_HOLD_OPEN_MS, type RoostApp } from './bootstrap';

/**
 * Graceful shutdown on SIGTERM/SIGINT (every role): refuse new sockets, answer new requests 503 with
 * `Connection: close` while the listener stays open, wait for the requests already in flight, then
 * close open sockets with 1012, pools and queues, and exit 0 as soon as that is done. A second
 * signal, or ROOST_SHUTDOWN_TIMEOUT_MS passing, exits 1 at once.
 */
function drainOnSignals(roost: RoostApp, config: Config): void {
  let draining = false;
  const drain = (signal: NodeJS.Signals) => {
    if (draining) process.exit(1);
    draining = true;
    const since = Date.now();
    roost.logger.info({ signal }, 'draining');
    roost.drainSockets();
    roost.drain.begin(DRAIN_HOLD_OPEN_MS);
    const deadline = setTimeout(() => {
      roost.logger.error({ timeout_ms: config.http.shutdownTimeoutMs }, 'drain timed out');
      roost.logger.flush?.();
      process.exit(1);
    }, config.http.shutdownTimeoutMs);
    deadline.unref();
    roost.drain
      .settled()
      .then(() => roost.app.close())
      .then(() => {
        roost.logger.info({ ms: Date.now() - since }, 'stopped');
        roost.logger.flush?.();
        process.exit(0);
      })
      .catch((error: unknown) => {
        roost.logger.error({ err: error }, 'shutdown failed');
        roost.logger.flush?.();
        process.exit(1);
      });
  };
  process.on('SIGTERM', drain);
  process.on('SIGINT', drain);
}

async function main(): Promise<void> {
  let config = loadConfig();
  config = ensureAdminToken(config, (token, file) => {
    process.stdout.write(`\nRoost operator admin token (shown once, stored in ${file}):\n\n  ${token}\n\n`);
  });
  const roost = await buildRoostApp(config);
  drainOnSignals(roost, config);
  await roost.listen();
  const where = config.databaseUrl === null ? `embedded PGlite in ${config.dataDir}` : 'Postgres';
  roost.logger.info({ port: config.port, host: config.host, database: where, version: config.version }, 'listening');
  if (process.stdout.isTTY || config.databaseUrl === null) {
    process.stderr.write(
      `Roost ${config.version} (${config.role}) listening on http://${config.host}:${config.port} — ${where}\n`,
    );
  }
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`roost: configuration error: ${error.message}\n`);
    process.exit(78);
  }
  process.stderr.write(
    `roost: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
