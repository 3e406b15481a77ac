import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { loadConfig, type Config } from '#config';
import { ulid } from '#domain';
import { createRoostApp } from '../../apps/roost/src/bootstrap';
import { TestClient } from './client';
import { createTestDatabase } from './database';
import { testBackend, testRedisUrl } from './services';

export interface TestAgent {
  handle: string;
  token: string;
}

export interface TestOperator {
  url: string;
  adminToken: string;
  client: TestClient;
  config: Config;
  app: NestFastifyApplication;
  /** Register an agent and return its token. */
  agent(handle: string, fields?: Record<string, unknown>): Promise<string>;
  /** Register `@<owner>.<name>` for each name (policy open): `{ alice: { handle, token }, … }`. */
  agents<N extends string>(owner: string, ...names: N[]): Promise<Record<N, TestAgent>>;
  close(): Promise<void>;
}

export interface OperatorOptions {
  backend?: 'postgres' | 'pglite';
  env?: Record<string, string>;
  /** Reuse a database (several operator processes sharing one Postgres). */
  databaseUrl?: string;
  /** Fan out through the test Redis (own key prefix) instead of the in-process bus. Postgres only. */
  redis?: boolean;
  /** Called with the built application before it initializes and listens (e.g. to add Fastify hooks). */
  beforeListen?: (app: NestFastifyApplication) => void;
}

/** An in-process operator on loopback with its own database: Postgres (default) or PGlite. */
export async function startOperator(options: OperatorOptions = {}): Promise<TestOperator> {
  const backend = options.backend ?? testBackend();
  const adminToken = `admin-${ulid()}`;
  let dataDir: string | undefined;
  let drop: (() => Promise<void>) | undefined;
  let databaseUrl = options.databaseUrl;
  if (backend === 'postgres' && databaseUrl === undefined) {
    const database = await createTestDatabase();
    databaseUrl = database.url;
    drop = database.drop;
  }
  if (backend === 'pglite') dataDir = mkdtempSync(join(tmpdir(), 'roost-pglite-'));
  const config = loadConfig({
    ROOST_ADMIN_TOKEN: adminToken,
    ROOST_LOG_LEVEL: 'silent',
    // Tests send in bursts; the limiter has its own tests, which set the limit explicitly.
    ROOST_RATE_LIMIT_PER_S: '0',
    // Many tests send bad tokens on purpose from one address; test/medium/limits.test.ts sets it.
    ROOST_AUTH_FAIL_LIMIT_PER_S: '0',
    PORT: '0',
    // No metrics listener unless a test asks for one: /metrics stays on the main port.
    ROOST_METRICS_PORT: '0',
    ...(databaseUrl && backend === 'postgres' ? { DATABASE_URL: databaseUrl } : {}),
    ...(dataDir ? { ROOST_DATA_DIR: dataDir } : {}),
    ...(options.redis && backend === 'postgres'
      ? { REDIS_URL: testRedisUrl(), ROOST_REDIS_PREFIX: `roost-test:${ulid()}:` }
      : {}),
    ...options.env,
  });
  const app = await createRoostApp(config);
  options.beforeListen?.(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;
  config.publicUrl = url;
  const client = new TestClient(url);
  const agent = async (handle: string, fields: Record<string, unknown> = {}): Promise<string> => {
    const reply = await client.post('/_admin/agents', { handle, policy: 'open', ...fields }, adminToken);
    if (reply.status !== 201) throw new Error(`creating ${handle}: ${reply.status} ${reply.text}`);
    return reply.body.token as string;
  };
  return {
    url,
    adminToken,
    client,
    config,
    app,
    agent,
    async agents<N extends string>(owner: string, ...names: N[]) {
      const made = {} as Record<N, TestAgent>;
      for (const name of names) {
        const handle = `@${owner}.${name}`;
        made[name] = { handle, token: await agent(handle) };
      }
      return made;
    },
    async close() {
      await app.close();
      await drop?.();
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A POST /messages body with a fresh id. */
export function envelope(to: string | string[], fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: ulid(),
    to: Array.isArray(to) ? to : [to],
    date_ms: Date.now(),
    content_parts: [{ type: 'text', text: 'hello' }],
    ...fields,
  };
}

/** Two api+gateway nodes on one database and one Redis key prefix (one deployment). */
export async function twoNodes(env: Record<string, string>): Promise<[TestOperator, TestOperator]> {
  const a = await startOperator({ backend: 'postgres', redis: true, env });
  const b = await startOperator({
    backend: 'postgres',
    databaseUrl: a.config.databaseUrl!,
    env: {
      ...env,
      ROOST_ADMIN_TOKEN: a.adminToken,
      REDIS_URL: testRedisUrl(),
      ROOST_REDIS_PREFIX: a.config.redisPrefix,
    },
  });
  return [a, b];
}
