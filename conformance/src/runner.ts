import { expectStatus, Failure, Skip } from './assert';
import { Http, type Reply } from './http';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomName } from './util';
import { connect, type ConnectOptions, type Socket } from './ws';

export type Group = 'asmtp' | 'interop' | 'roost';
export const GROUPS: readonly Group[] = ['asmtp', 'interop', 'roost'];

export interface TestDef {
  id: string;
  group: Group;
  title: string;
  /** Runs alone (timing-sensitive or load-generating). */
  exclusive: boolean;
  run: (t: T) => Promise<void>;
}

const registry: TestDef[] = [];

/** Register a test; tests run in registration order. */
export function test(
  group: Group,
  id: string,
  title: string,
  run: (t: T) => Promise<void>,
  options: { exclusive?: boolean } = {},
): void {
  if (registry.some((def) => def.id === id)) throw new Error(`duplicate test id ${id}`);
  registry.push({ id, group, title, exclusive: options.exclusive ?? false, run });
}

export const registeredTests = (): readonly TestDef[] => registry;

export interface Options {
  url: string;
  adminToken: string;
  /** The base URL file urls must start with (ASMTP.md §7.2); defaults to `url`. */
  publicUrl: string;
  groups: Set<Group>;
  only?: RegExp;
  json?: string;
  verbose: boolean;
  keepAgents: boolean;
  /** Pause after a socket opens before acting, so the operator has registered it. */
  wsSettleMs: number;
  /** How long "nothing more arrives" is watched for. */
  quietMs: number;
  /** How long an expected frame may take. */
  frameTimeoutMs: number;
  testTimeoutMs: number;
  /** Tests run at once (each has its own agents); exclusive ones run alone. */
  concurrency: number;
}

export interface Agent {
  handle: string;
  token: string;
  owner: string;
  name: string;
}

export interface AgentOptions {
  owner?: string;
  policy?: 'open' | 'allowlist';
  /** Further POST /_admin/agents fields (display_name, visibility, …). */
  fields?: Record<string, unknown>;
}

/** What one run shares: the target, the unique owner prefix, what was created, detected capabilities. */
export class Run {
  /** Every owner this run creates starts with it, e.g. `cf3k9x2a`. */
  readonly prefix = `cf${randomName(8)}`;
  readonly http: Http;
  readonly agents = new Map<string, string>();
  readonly orgs = new Set<string>();
  private readonly capabilities = new Map<string, Promise<string | null>>();
  private probeAgent: Promise<Agent> | undefined;

  constructor(readonly options: Options) {
    this.http = new Http(options.url);
  }

  async provision(
    handle: string,
    policy: 'open' | 'allowlist' | undefined,
    fields: Record<string, unknown> = {},
  ): Promise<Agent> {
    const body: Record<string, unknown> = { handle, ...fields };
    if (policy !== undefined) body.policy = policy;
    const reply = await this.http.post('/_admin/agents', body, this.options.adminToken);
    if (reply.status !== 201)
      throw new Failure(`provisioning ${handle}: POST /_admin/agents → ${reply.status} ${reply.text.slice(0, 200)}`);
    this.agents.set(handle, reply.body.token);
    const [owner, name] = handle.slice(1).split('.');
    return { handle, token: reply.body.token as string, owner, name };
  }

  /** An open agent of this run used to detect capabilities. */
  probe(): Promise<Agent> {
    return (this.probeAgent ??= this.provision(`@${this.prefix}-probe.probe`, 'open'));
  }

  /**
   * A capability, detected once per run: `detect` returns null when the target has it, else the
   * reason to skip what needs it.
   */
  capability(name: string, detect: () => Promise<string | null>): Promise<string | null> {
    let found = this.capabilities.get(name);
    if (!found) this.capabilities.set(name, (found = detect()));
    return found;
  }

  /** Delete every agent and organization this run created (best effort). */
  async cleanup(): Promise<{ agents: number; failed: number }> {
    let failed = 0;
    const token = this.options.adminToken;
    const handles = [...this.agents.keys()];
    for (let i = 0; i < handles.length; i += 8) {
      await Promise.all(
        handles.slice(i, i + 8).map(async (handle) => {
          try {
            const reply = await this.http.delete(`/_admin/agents/${encodeURIComponent(handle)}`, token, {
              validate: false,
            });
            if (reply.status !== 204 && reply.status !== 404) failed++;
          } catch {
            failed++;
          }
        }),
      );
    }
    for (const org of this.orgs) {
      try {
        await this.http.delete(`/_admin/orgs/${org}`, token, { validate: false });
      } catch {
        failed++;
      }
    }
    return { agents: handles.length, failed };
  }
}

/** What one test works with. */
export class T {
  /** Observations worth reporting on a passing test (printed with --verbose, kept in the JSON report). */
  readonly notes: string[] = [];
  private readonly sockets: Socket[] = [];

  constructor(
    readonly run: Run,
    readonly def: TestDef,
    private readonly index: number,
  ) {}

  get http(): Http {
    return this.run.http;
  }

  get options(): Options {
    return this.run.options;
  }

  get adminToken(): string {
    return this.run.options.adminToken;
  }

  /** An owner name unique to this run and test: `<prefix>-t<index><suffix>`. */
  owner(suffix = ''): string {
    return `${this.run.prefix}-t${this.index}${suffix}`;
  }

  /** A fresh agent (policy `open` unless stated) under this test's owner. */
  agent(name: string, options: AgentOptions = {}): Promise<Agent> {
    const policy = options.policy ?? 'open';
    return this.run.provision(`@${options.owner ?? this.owner()}.${name}`, policy, options.fields);
  }

  /** Several open agents under this test's owner. */
  async agents<N extends string>(...names: N[]): Promise<Record<N, Agent>> {
    const out = {} as Record<N, Agent>;
    const created = await Promise.all(names.map((name) => this.agent(name)));
    names.forEach((name, i) => (out[name] = created[i]));
    return out;
  }

  /** Open a `/connect` socket for `agent` (closed when the test ends) and let it settle. */
  async listen(agent: Agent | undefined, options: ConnectOptions = {}, label?: string): Promise<Socket> {
    const socket = await this.connect(agent, options, label);
    await sleep(this.options.wsSettleMs);
    return socket;
  }

  /** Open a socket without settling. */
  async connect(agent: Agent | undefined, options: ConnectOptions = {}, label?: string): Promise<Socket> {
    let socket: Socket;
    try {
      socket = await connect(
        this.options.url,
        { token: agent?.token, ...options },
        label ?? `socket of ${agent?.handle ?? 'nobody'}`,
      );
    } catch (error) {
      const status = (error as { status?: number }).status;
      throw new Failure(
        `WebSocket upgrade to /connect${status !== undefined ? ` refused with ${status}: ${(error as { text?: string }).text ?? ''}` : ` failed: ${(error as Error).message}`}`,
      );
    }
    this.sockets.push(socket);
    return socket;
  }

  /** Track a socket opened elsewhere so the test's end checks and closes it. */
  track(socket: Socket): Socket {
    this.sockets.push(socket);
    return socket;
  }

  /** Wait the quiet period: what has not arrived by then is taken as never arriving. */
  quiet(ms = this.options.quietMs): Promise<void> {
    return sleep(ms);
  }

  note(text: string): void {
    this.notes.push(text);
  }

  skip(reason: string): never {
    throw new Skip(reason);
  }

  /** Skip unless the capability is there. */
  async need(capability: Promise<string | null>): Promise<void> {
    const reason = await capability;
    if (reason !== null) this.skip(reason);
  }

  /** Shorthand: POST /messages by `agent`. */
  send(agent: Agent, body: unknown): Promise<Reply> {
    return this.http.post('/messages', body, agent.token);
  }

  /** POST /messages that must be accepted (202); returns the 202 body. */
  async sent(
    agent: Agent,
    body: Record<string, unknown>,
  ): Promise<{ id: string; created_at: number; received_ms: number; recipients: Array<{ handle: string }> }> {
    const reply = await this.send(agent, body);
    expectStatus(reply, 202, 'send');
    return reply.body;
  }

  /** The test's end: sockets closed; a frame problem any socket recorded fails the test. */
  async finish(): Promise<void> {
    const violations = this.sockets.flatMap((socket) => socket.violations);
    this.close();
    if (violations.length > 0) throw new Failure(violations.slice(0, 3).join(' | '));
  }

  close(): void {
    for (const socket of this.sockets) socket.terminate();
    this.sockets.length = 0;
  }
}
