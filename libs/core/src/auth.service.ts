import { Injectable } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { AgentsRepository, OrgsRepository, type NullableMailboxState } from '#db';
import { bearerFrom, hashesEqual, hashToken, unauthorized, type Agent, type RecipientAgent } from '#domain';
import { Metrics } from '#metrics';
import { Coalescer } from './coalescer';
import { UnknownTokens } from './unknown-tokens';

/**
 * A recipient and, when the senders' lookup loaded it, its mailbox state as that lookup read it
 * (the lock-free accept path's hint; the compare-and-set refuses it if another writer moved on).
 */
export type RecipientWithState = RecipientAgent & Partial<NullableMailboxState>;

/**
 * Recipients loaded with a sender: agents by handle (those its request named, and the others named
 * in the same lookup; the sender's own row too when named, never a policy input, only its mailbox
 * state), and the handles among them that blocked the sender.
 */
export interface Recipients {
  agents: ReadonlyMap<string, RecipientWithState>;
  blockedBy: readonly string[];
}

export const NO_RECIPIENTS: Recipients = { agents: new Map(), blockedBy: [] };

/** Who holds an admin token: the operator (everything) or one organization (`@<org>.*` only). */
export type AdminScope = { kind: 'operator' } | { kind: 'org'; org: string };

interface SenderLookup {
  tokenHash: string;
  handles: readonly string[];
}

interface SenderFound {
  sender: Agent | undefined;
  recipients: Recipients;
}

/** Lookups of concurrent requests share a query; at most this many such queries are out at once. */
const LOOKUPS_IN_FLIGHT = 2;
const LOOKUPS_PER_QUERY = 256;

/** Bearer tokens → agents and admin scopes (ASMTP.md §1.3). Tokens are compared as SHA-256 hashes. */
@Injectable()
export class AuthService {
  /** Every authenticated request looks its agent up: under load, many requests share a round trip. */
  private readonly lookups: Coalescer<SenderLookup, SenderFound>;

  /** Token hashes just looked up and not found: refused again without a query for a short window. */
  private readonly unknownAgentTokens = new UnknownTokens();
  private readonly unknownOrgTokens = new UnknownTokens();

  constructor(
    private readonly agents: AgentsRepository,
    private readonly orgs: OrgsRepository,
    @InjectConfig() private readonly config: Config,
    private readonly metrics: Metrics,
  ) {
    // Embedded PGlite runs each query on the event loop over one session: one lookup at a time,
    // gathering every request of an event-loop turn into it (else each request got its own). On
    // Postgres a lookup starts at the end of the turn its first request arrived in, with every
    // request of that turn: a burst (the senders answered by one commit send again together) cost
    // one query per request while a slot was free, and each query costs the process and Postgres
    // CPU (accept bench: 0.30 → 0.19 statements per envelope).
    const embedded = config.databaseUrl === null;
    this.lookups = new Coalescer(
      (keys) => this.lookUp(keys),
      embedded ? 1 : LOOKUPS_IN_FLIGHT,
      LOOKUPS_PER_QUERY,
      embedded || 'turn',
    );
  }

  /**
   * A token was just minted: it must not be refused from the unknown-token cache. A minted token is
   * 32 random bytes that nobody could present before it existed, so only this node's own entry
   * (never another node's) could matter; this drops it anyway.
   */
  tokenIssued(tokenHash: string): void {
    this.unknownAgentTokens.forget(tokenHash);
    this.unknownOrgTokens.forget(tokenHash);
  }

  async agentFor(token: string | null): Promise<Agent> {
    return (await this.authenticate(token, [])).agent;
  }

  /**
   * Authenticate a sender and, in the same round trip, load the recipients it names (the accept
   * path's policy inputs). 401 exactly as `agentFor`.
   */
  async senderFromHeader(
    authorization: string | undefined,
    handles: readonly string[],
  ): Promise<{ agent: Agent; recipients: Recipients }> {
    const started = performance.now();
    try {
      return await this.authenticate(bearerFrom(authorization), handles);
    } finally {
      // A send (`SenderGuard`) names its recipients: its lookup is the auth stage of the accept path.
      if (handles.length > 0) this.metrics.acceptStage.observe({ stage: 'auth' }, (performance.now() - started) / 1000);
    }
  }

  private async authenticate(
    token: string | null,
    handles: readonly string[],
  ): Promise<{ agent: Agent; recipients: Recipients }> {
    if (token === null) throw unauthorized();
    const tokenHash = hashToken(token);
    if (this.unknownAgentTokens.has(tokenHash, Date.now())) {
      this.metrics.unknownTokenHits.inc();
      throw unauthorized('unknown agent bearer');
    }
    const { sender, recipients } = await this.lookups.load({ tokenHash, handles });
    if (!sender) {
      this.unknownAgentTokens.add(tokenHash, Date.now());
      throw unauthorized('unknown agent bearer');
    }
    return { agent: sender, recipients };
  }

  /**
   * One query for a batch of lookups; each gets its sender and the batch's recipients (shared, not
   * copied per request: a send names tens of them), with those that blocked this sender.
   */
  private async lookUp(keys: SenderLookup[]): Promise<SenderFound[]> {
    const tokenHashes = new Set<string>();
    const handles = new Set<string>();
    for (const key of keys) {
      tokenHashes.add(key.tokenHash);
      for (const handle of key.handles) handles.add(handle);
    }
    const { senders, recipients } = await this.agents.findSendersAndRecipients([...tokenHashes], [...handles]);
    return keys.map(({ tokenHash }) => {
      const found = senders.get(tokenHash);
      if (found === undefined) return { sender: undefined, recipients: NO_RECIPIENTS };
      return { sender: found.agent, recipients: { agents: recipients, blockedBy: found.blockedBy } };
    });
  }

  async adminFromHeader(authorization: string | undefined): Promise<AdminScope> {
    const token = bearerFrom(authorization);
    if (token === null) throw unauthorized();
    const hash = hashToken(token);
    if (this.config.adminTokenHash !== null && hashesEqual(hash, this.config.adminTokenHash)) {
      return { kind: 'operator' };
    }
    if (this.unknownOrgTokens.has(hash, Date.now())) {
      this.metrics.unknownTokenHits.inc();
      throw unauthorized('invalid admin bearer');
    }
    const org = await this.orgs.findByTokenHash(hash);
    if (org) return { kind: 'org', org: org.name };
    this.unknownOrgTokens.add(hash, Date.now());
    throw unauthorized('invalid admin bearer');
  }
}
