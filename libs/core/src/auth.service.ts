import { Injectable } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { AgentsRepository, OrgsRepository } from '#db';
import { bearerFrom, hashesEqual, hashToken, unauthorized, type Agent } from '#domain';

/** Recipient agents by handle, each with whether it blocked the sender. */
export type Recipients = Map<string, Agent & { blocks_sender: boolean }>;

/** Who holds an admin token: the operator (everything) or one organization (`@<org>.*` only). */
export type AdminScope = { kind: 'operator' } | { kind: 'org'; org: string };

/** Bearer tokens → agents and admin scopes (ASMTP.md §1.3). Tokens are compared as SHA-256 hashes. */
@Injectable()
export class AuthService {
  constructor(
    private readonly agents: AgentsRepository,
    private readonly orgs: OrgsRepository,
    @InjectConfig() private readonly config: Config,
  ) {}

  async agentFor(token: string | null): Promise<Agent> {
    if (token === null) throw unauthorized();
    const agent = await this.agents.findByTokenHash(hashToken(token));
    if (!agent) throw unauthorized('unknown agent bearer');
    return agent;
  }

  agentFromHeader(authorization: string | undefined): Promise<Agent> {
    return this.agentFor(bearerFrom(authorization));
  }

  /**
   * Authenticate a sender and, in the same round trip, load the recipients it names (the accept
   * path's policy inputs). 401 exactly as `agentFromHeader`.
   */
  async senderFromHeader(authorization: string | undefined, handles: readonly string[]): Promise<{ agent: Agent; recipients: Recipients }> {
    const token = bearerFrom(authorization);
    if (token === null) throw unauthorized();
    if (handles.length === 0) return { agent: await this.agentFor(token), recipients: new Map() };
    const { sender, recipients } = await this.agents.findSenderAndRecipients(hashToken(token), handles);
    if (!sender) throw unauthorized('unknown agent bearer');
    return { agent: sender, recipients: new Map(recipients.map((recipient) => [recipient.handle, recipient])) };
  }

  async adminFromHeader(authorization: string | undefined): Promise<AdminScope> {
    const token = bearerFrom(authorization);
    if (token === null) throw unauthorized();
    const hash = hashToken(token);
    if (this.config.adminTokenHash !== null && hashesEqual(hash, this.config.adminTokenHash)) {
      return { kind: 'operator' };
    }
    const org = await this.orgs.findByTokenHash(hash);
    if (org) return { kind: 'org', org: org.name };
    throw unauthorized('invalid admin bearer');
  }
}
