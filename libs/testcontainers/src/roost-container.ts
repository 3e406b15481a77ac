import { randomBytes } from 'node:crypto';
import { AbstractStartedContainer, GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import { RoostAdminClient, RoostClient, type AdminAgentInput, type RoostError } from '#client';

/** The image's API/WebSocket port and its metrics port (deploy/docker/Dockerfile). */
export const ROOST_PORT = 8025;
export const ROOST_METRICS_PORT = 9464;

export type Role = 'all' | 'api' | 'gateway' | 'worker';

/** An agent to register at start: its handle and any `POST /_admin/agents` field. */
export type AgentSpec = string | ({ handle: string } & AdminAgentInput);

/**
 * A real Roost for integration tests, from the image (deploy/docker/Dockerfile), started the way
 * production runs it: uid 1000, read-only root filesystem, a tmpfs `/tmp`, ready when `/readyz`
 * answers 200. Alone it is the embedded operator (PGlite in the container's `/data` volume); with
 * `withDatabaseUrl`/`withRedisUrl` and `withRole` it is one node of a cluster.
 *
 *   const roost = await new RoostContainer('registry.example.com/roost:0.1.0')
 *     .withAgents({ handle: '@acme.alice', policy: 'open' }, { handle: '@acme.bob', policy: 'open' })
 *     .start();
 *   await roost.client('@acme.alice').send({ to: ['@acme.bob'], content_parts: [textPart('hi')] });
 *   roost.getAgentToken('@acme.bob'); roost.getUrl(); roost.getWebSocketUrl();
 *   await roost.stop();
 */
export class RoostContainer extends GenericContainer {
  private adminToken = randomBytes(24).toString('base64url');
  private readonly agents: Array<{ handle: string } & AdminAgentInput> = [];
  private role: Role | undefined;

  constructor(image: string) {
    super(image);
    this.withExposedPorts(ROOST_PORT)
      .withTmpFs({ '/tmp': 'rw,noexec,nosuid,size=64m' })
      .withWaitStrategy(Wait.forHttp('/readyz', ROOST_PORT).forStatusCode(200))
      .withStartupTimeout(90_000);
    this.hostConfig.ReadonlyRootfs = true;
  }

  /** Agents registered once the operator is ready (needs a role that serves the admin API). */
  withAgents(...agents: AgentSpec[]): this {
    for (const agent of agents) this.agents.push(typeof agent === 'string' ? { handle: agent } : { ...agent });
    return this;
  }

  /** The operator admin token (≥ 16 characters); a random one otherwise. */
  withAdminToken(token: string): this {
    this.adminToken = token;
    return this;
  }

  /** `roost api|gateway|worker|all` (default: all). */
  withRole(role: Role): this {
    this.role = role;
    return this.withCommand([role]);
  }

  withDatabaseUrl(url: string): this {
    return this.withEnvironment({ DATABASE_URL: url });
  }

  withRedisUrl(url: string): this {
    return this.withEnvironment({ REDIS_URL: url });
  }

  override async start(): Promise<StartedRoostContainer> {
    if (this.agents.length > 0 && (this.role === 'gateway' || this.role === 'worker')) {
      throw new Error(`RoostContainer: withAgents needs the admin API (role all or api), not ${this.role}`);
    }
    this.withEnvironment({ ROOST_ADMIN_TOKEN: this.adminToken });
    const started = await super.start();
    const url = `http://${started.getHost()}:${started.getMappedPort(ROOST_PORT)}`;
    const tokens = new Map<string, string>();
    if (this.agents.length > 0) {
      const admin = new RoostAdminClient({ url, adminToken: this.adminToken });
      try {
        for (const { handle, ...fields } of this.agents) {
          const created = await retryWhileUnavailable(() => admin.createAgent(handle, fields));
          tokens.set(created.handle, created.token);
        }
      } catch (error) {
        await started.stop();
        throw error;
      }
    }
    return new StartedRoostContainer(started, url, this.adminToken, tokens);
  }
}

/**
 * A 503 (a dependency briefly unavailable, e.g. Postgres connections on a loaded host just after
 * start) changed nothing: retry it, honouring Retry-After, for up to 30 s.
 */
async function retryWhileUnavailable<T>(attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const { status, details } = error as RoostError;
      if (status !== 503 || Date.now() > deadline) throw error;
      const retryAfterS = Number((details as { retry_after_s?: number } | undefined)?.retry_after_s ?? 0);
      await new Promise((resolve) => setTimeout(resolve, Math.min(Math.max(retryAfterS * 1000, 250), 5_000)));
    }
  }
}

export class StartedRoostContainer extends AbstractStartedContainer {
  constructor(
    started: StartedTestContainer,
    private readonly url: string,
    private readonly adminToken: string,
    private readonly tokens: ReadonlyMap<string, string>,
  ) {
    super(started);
  }

  /** `http://<host>:<port>`: the REST API (and `/connect` on roles all and gateway). */
  getUrl(): string {
    return this.url;
  }

  /** `ws://<host>:<port>/connect`. */
  getWebSocketUrl(): string {
    return `${this.url.replace(/^http/, 'ws')}/connect`;
  }

  getAdminToken(): string {
    return this.adminToken;
  }

  /** The token of an agent given to `withAgents` (by its canonical handle, e.g. `@acme.bob`). */
  getAgentToken(handle: string): string {
    const token = this.tokens.get(handle.toLowerCase());
    if (token === undefined)
      throw new Error(`RoostContainer: no agent ${handle} (known: ${[...this.tokens.keys()].join(', ')})`);
    return token;
  }

  /** The handles `withAgents` registered, canonical. */
  getAgents(): string[] {
    return [...this.tokens.keys()];
  }

  /** A typed client acting as one of the agents. */
  client(handle: string): RoostClient {
    return new RoostClient({ url: this.url, token: this.getAgentToken(handle) });
  }

  admin(): RoostAdminClient {
    return new RoostAdminClient({ url: this.url, adminToken: this.adminToken });
  }
}
