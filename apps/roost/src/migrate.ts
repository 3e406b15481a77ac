import { ConfigError, loadConfig } from '#config';
import { loadMigrations, migrationsApplied, openDatabase } from '#db';

/**
 * `roost migrate`: apply every pending migration in db/migrations to DATABASE_URL (or to the
 * embedded database in ROOST_DATA_DIR) and exit. The Helm pre-install/pre-upgrade Job runs this;
 * every role also migrates at start under the same advisory lock, so this is an ordering aid
 * (schema ready before new pods roll), not a requirement.
 */
export async function runMigrations(env: Record<string, string | undefined> = process.env): Promise<string[]> {
  // Migrating authenticates nobody and publishes nothing: it needs neither the admin token nor
  // Redis, whatever role the shared environment names.
  const config = loadConfig({
    ...env,
    ROOST_ROLE: 'all',
    ROOST_ADMIN_TOKEN_HASH: env.ROOST_ADMIN_TOKEN_HASH || '0'.repeat(64),
  });
  const database = await openDatabase(config); // migrates under the advisory lock
  try {
    if (!(await migrationsApplied(database))) throw new Error('migrations still pending after migrate');
    return loadMigrations().map((migration) => migration.version);
  } finally {
    await database.close();
  }
}

if (require.main === module) {
  runMigrations()
    .then((versions) => {
      process.stdout.write(
        `roost migrate: schema at ${versions[versions.length - 1] ?? '(none)'} (${versions.length} migrations)\n`,
      );
      process.exit(0);
    })
    .catch((error: unknown) => {
      if (error instanceof ConfigError) {
        process.stderr.write(`roost migrate: configuration error: ${error.message}\n`);
        process.exit(78);
      }
      process.stderr.write(
        `roost migrate: failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      process.exit(1);
    });
}
