import { hash } from 'node:crypto';
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
  /**
   * The policy epoch (migration 0009) the lookup read these at: the send's commit checks it has not
   * moved on. Absent for recipients loaded by the accept path itself.
   */
  policyEpoch?: number;
  /** True when the lookup was kept from an earlier send (not read for this one). */
  kept?: boolean;
  /**
   * The same lookup read afresh: for a send whose kept lookup refused it, or (`stale`) whose commit
   * found the policy epoch moved, which also pauses this node's kept lookups (KEPT_PAUSE_MS).
   */
  reload?: (stale?: boolean) => Promise<{ agent: Agent; recipients: Recipients }>;
}

export const NO_RECIPIENTS: Recipients = { agents: new Map(), blockedBy: [] };

/**
 * A kept lookup's key: a digest of the token's hash and the named handles, sorted (their order does
 * not change the decision; a send may name 100 long handles, the key stays 44 characters).
 */
const keptKey = (tokenHash: string, handles: readonly string[]): string =>
  hash('sha256', `${tokenHash}\n${[...handles].sort().join('\n')}`, 'base64');

/** Characters of a list of handles or patterns. */
const textOf = (list: readonly string[]): number => list.reduce((sum, entry) => sum + entry.length, 0);

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

/** A send's sender lookup kept for the next sends of the same token to the same recipients. */
interface KeptLookup {
  sender: Agent;
  recipients: Recipients;
  policyEpoch: number;
  /** `Date.now()` when it was read. */
  readAt: number;
}

/** Kept sender lookups per node (oldest dropped first). */
export const KEPT_LOOKUPS_MAX = 10_000;
/**
 * A lookup whose size passes this many characters is not kept: its sends are looked up afresh. Its
 * size is the sender's card, description and allowlist, each named recipient's handle and
 * allowlist, and KEPT_RECIPIENT_CHARS per named recipient for its objects (so at most 15
 * recipients). With KEPT_LOOKUPS_MAX this bounds the map to about 60 MB at worst, an estimate from
 * object sizes, not a measurement (a few MB for ordinary agents, whose lookups are a few hundred
 * bytes).
 */
export const KEPT_ENTRY_MAX_CHARS = 2_048;
/** What a kept recipient's own objects (its row, map slot, allowlist array) count for, in characters. */
export const KEPT_RECIPIENT_CHARS = 128;
/**
 * After a commit found the policy epoch moved under a kept lookup, this node looks every send up
 * afresh for this long: when policies change faster than the lookups pay back (agents blocking
 * and unblocking many times a second), each kept send would cost a failed statement and a lookup
 * anyway; this way such churn costs about what it did before anything was kept.
 */
export const KEPT_PAUSE_MS = 1_000;

/** Lookups of concurrent requests share a query; at most this many such queries are out at once. */
const LOOKUPS_IN_FLIGHT = 2;
const LOOKUPS_PER_QUERY = 256;

/** Bearer tokens → agents and admin scopes (ASMTP.md §1.3). Tokens are compared as SHA-256 hashes. */
@Injectable()
export class AuthService {
  /** Every authenticated request looks its agent up: under load, many requests share a round trip. */
  private readonly lookups: Coalescer<SenderLookup, SenderFound>;

  /**
   * Sends' sender lookups by token hash and named handles, kept so that an agent sending again to
   * the same recipients needs no lookup round trip. Safe because the commit of a send admitted by
   * one checks the policy epoch it carries (migration 0009): a change since to what the lookup read
   * fails that commit, and the send is looked up afresh and retried (`AcceptService`).
   */
  private readonly kept = new Map<string, KeptLookup>();
  /** The newest policy epoch any lookup of this node read: kept lookups older than it are dropped. */
  private newestEpoch = 0;
  /** ROOST_ACCEPT_KEEP_LOOKUPS_MS: how long a lookup is kept; 0 keeps none. */
  private readonly keepMs: number;
  /** `Date.now()` of the last commit that found the epoch moved under a kept lookup. */
  private pausedAt = -Infinity;

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
    this.keepMs = config.accept.keepLookupsMs;
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
    if (token === null) throw unauthorized();
    return (await this.authenticate(hashToken(token), [])).agent;
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
      const token = bearerFrom(authorization);
      if (token === null) throw unauthorized();
      const tokenHash = hashToken(token);
      return await (handles.length === 0
        ? this.authenticate(tokenHash, handles)
        : this.sender(tokenHash, handles, false));
    } finally {
      // A send (`SenderGuard`) names its recipients: its lookup is the auth stage of the accept path.
      if (handles.length > 0) this.metrics.acceptStages.auth((performance.now() - started) / 1000);
    }
  }

  /** A send's sender and recipients: kept from an earlier send (unless `fresh`), else looked up. */
  private async sender(
    tokenHash: string,
    handles: readonly string[],
    fresh: boolean,
  ): Promise<{ agent: Agent; recipients: Recipients }> {
    const reload = (stale = false) => {
      if (stale) this.pausedAt = Date.now();
      return this.sender(tokenHash, handles, true);
    };
    const key = keptKey(tokenHash, handles);
    const paused = Date.now() - this.pausedAt < KEPT_PAUSE_MS;
    const kept = fresh || this.keepMs === 0 || paused ? undefined : this.keptFor(key);
    // Built field by field: on Node 20 an object spread followed by more properties
    // (`{ ...kept.recipients, kept: true, reload }`) took 1.6 µs, on every kept send.
    if (kept) {
      this.metrics.keptSenderLookups.inc();
      const { agents, blockedBy } = kept.recipients;
      return {
        agent: kept.sender,
        recipients: { agents, blockedBy, policyEpoch: kept.policyEpoch, kept: true, reload },
      };
    }
    const { agent, recipients } = await this.authenticate(tokenHash, handles);
    if (this.keepMs > 0 && recipients.policyEpoch !== undefined) this.keep(key, agent, handles, recipients);
    return { agent, recipients: { ...recipients, reload } };
  }

  /** The kept lookup under `key`, unless it is older than `keepMs` or than the newest epoch read. */
  private keptFor(key: string): KeptLookup | undefined {
    const kept = this.kept.get(key);
    if (kept === undefined) return undefined;
    if (kept.policyEpoch < this.newestEpoch || Date.now() - kept.readAt >= this.keepMs) {
      this.kept.delete(key);
      return undefined;
    }
    return kept;
  }

  /**
   * Keep a lookup: the sender and only the recipients it named (not the whole shared batch),
   * without their mailbox states: those go stale with every send, and the accept path writing
   * against a stale one would fail its compare-and-set and lock the mailbox for a while.
   */
  private keep(key: string, sender: Agent, handles: readonly string[], recipients: Recipients): void {
    const agents = new Map<string, RecipientWithState>();
    let chars = (sender.card_body?.length ?? 0) + (sender.description?.length ?? 0) + textOf(sender.allowlist);
    for (const handle of handles) {
      const agent = recipients.agents.get(handle);
      // A send naming a handle that does not exist is refused: nothing worth keeping.
      if (agent === undefined) return;
      chars += KEPT_RECIPIENT_CHARS + handle.length + textOf(agent.allowlist);
      const { last_seq: _seq, last_created_at: _createdAt, ...policy } = agent;
      agents.set(handle, policy);
    }
    if (chars > KEPT_ENTRY_MAX_CHARS) return;
    const blockedBy = recipients.blockedBy.filter((handle) => agents.has(handle));
    this.kept.delete(key);
    this.kept.set(key, {
      sender,
      recipients: { agents, blockedBy },
      policyEpoch: recipients.policyEpoch!,
      readAt: Date.now(),
    });
    for (const oldest of this.kept.keys()) {
      if (this.kept.size <= KEPT_LOOKUPS_MAX) break;
      this.kept.delete(oldest);
    }
  }

  private async authenticate(
    tokenHash: string,
    handles: readonly string[],
  ): Promise<{ agent: Agent; recipients: Recipients }> {
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
    const { senders, recipients, policyEpoch } = await this.agents.findSendersAndRecipients(
      [...tokenHashes],
      [...handles],
    );
    this.newestEpoch = Math.max(this.newestEpoch, policyEpoch);
    return keys.map(({ tokenHash }) => {
      const found = senders.get(tokenHash);
      if (found === undefined) return { sender: undefined, recipients: NO_RECIPIENTS };
      return { sender: found.agent, recipients: { agents: recipients, blockedBy: found.blockedBy, policyEpoch } };
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
