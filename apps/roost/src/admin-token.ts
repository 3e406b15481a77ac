import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { hashToken, mintToken } from '#domain';
import type { Config } from '#config';

/**
 * The embedded default needs no configuration: on first start it mints the operator admin
 * token, stores it mode 0600 in the data folder and prints it once (EXTENSIONS.md §5).
 */
export function ensureAdminToken(config: Config, announce: (token: string, file: string) => void): Config {
  if (config.adminTokenHash !== null) return config;
  const file = join(config.dataDir, 'admin-token');
  let token: string;
  if (existsSync(file)) {
    token = readFileSync(file, 'utf8').trim();
  } else {
    mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    token = mintToken();
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
    announce(token, file);
  }
  return { ...config, adminTokenHash: hashToken(token) };
}
