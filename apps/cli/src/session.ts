import { handleProblem, RoostAdminClient, RoostClient } from '#client';
import { resolveContext, type Context, type Flags } from './config';
import { CliError, EXIT, printer, type ErrorContext, type Printer } from './output';

export const VERSION = '0.1.0';
export const USER_AGENT = `roost-cli/${VERSION} node/${process.versions.node}`;

/** Global options every command takes. */
export interface GlobalOptions extends Flags {
  json?: boolean;
}

/** What a command runs with: resolved configuration, a printer, and clients on demand. */
export class Session {
  readonly ctx: Context;
  readonly print: Printer;

  constructor(readonly options: GlobalOptions) {
    this.ctx = resolveContext(options);
    this.print = printer(options.json === true);
  }

  /** The operator URL, checked when a command is about to use it (so `config show` still shows a bad one). */
  url(): string {
    if (!/^https?:\/\/[^/]/.test(this.ctx.url)) {
      throw new CliError(
        `not an operator URL: ${this.ctx.url} (from ${this.ctx.sources.url})`,
        this.ctx.sources.url === '--url' ? EXIT.USAGE : EXIT.CONFIG,
        'use http://host:port or https://host[/prefix], e.g. --url http://127.0.0.1:8025',
        'BAD_URL',
      );
    }
    return this.ctx.url;
  }

  get where(): ErrorContext {
    return { url: this.ctx.url, agent: this.ctx.agent, profile: this.ctx.profile };
  }

  requireAgent(): string {
    if (!this.ctx.agent) {
      throw new CliError(
        'no agent selected',
        EXIT.CONFIG,
        'pass --as @owner.name, set ROOST_AGENT, or save a default with `roost config use @owner.name` (this folder) or `roost config profile <name> --agent @owner.name`',
        'NO_AGENT',
      );
    }
    const problem = handleProblem(this.ctx.agent);
    if (problem) {
      const name =
        this.ctx.agent
          .replace(/^@/, '')
          .split('.')
          .pop()!
          .toLowerCase()
          .replace(/[^a-z0-9_-]/g, '') || 'name';
      const handle = problem.suggestion ?? `@<org>.${name}`;
      throw new CliError(
        `the acting agent (from ${this.ctx.sources.agent}) ${problem.message}`,
        EXIT.USAGE,
        `pass --as ${handle}; create it first with \`roost admin agent create ${handle}\` if it does not exist`,
        'INVALID_HANDLE',
      );
    }
    return this.ctx.agent;
  }

  requireToken(): string {
    const agent = this.requireAgent();
    if (!this.ctx.token) {
      throw new CliError(
        `no token for ${agent} in profile ${this.ctx.profile}`,
        EXIT.CONFIG,
        `create the agent with \`roost admin agent create ${agent}\` (stores its token), store an existing one with \`roost config token ${agent}\` (reads stdin), or set ROOST_TOKEN`,
        'NO_TOKEN',
      );
    }
    return this.ctx.token;
  }

  client(): RoostClient {
    return new RoostClient({ url: this.url(), token: this.requireToken(), userAgent: USER_AGENT });
  }

  admin(): RoostAdminClient {
    if (!this.ctx.adminToken) {
      throw new CliError(
        'no admin token',
        EXIT.CONFIG,
        'pass --admin-token, set ROOST_ADMIN_TOKEN, or store it with `roost config admin-token` (reads stdin); `roost serve` stores its own',
        'NO_ADMIN_TOKEN',
      );
    }
    return new RoostAdminClient({ url: this.url(), adminToken: this.ctx.adminToken, userAgent: USER_AGENT });
  }
}
