import { ConfigError, loadConfig } from '#config';
import { ensureAdminToken } from './admin-token';
import { createRoostApp } from './bootstrap';

async function main(): Promise<void> {
  let config = loadConfig();
  config = ensureAdminToken(config, (token, file) => {
    process.stdout.write(
      `\nRoost operator admin token (shown once, stored in ${file}):\n\n  ${token}\n\n`,
    );
  });
  const app = await createRoostApp(config);
  await app.listen({ port: config.port, host: config.host });
  const where = config.databaseUrl === null ? `embedded PGlite in ${config.dataDir}` : 'Postgres';
  process.stdout.write(`Roost ${config.version} (${config.role}) listening on http://${config.host}:${config.port} — ${where}\n`);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`roost: configuration error: ${error.message}\n`);
    process.exit(78);
  }
  process.stderr.write(`roost: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
