import { Injectable } from '@nestjs/common';
import { FrameBus } from '#bus';
import { InjectConfig, type Config } from '#config';
import { AgentsRepository, EnvelopesRepository, ReceiptsRepository } from '#db';
import { Metrics } from '#metrics';
import {
  AsmtpError,
  badRequest,
  expandRecipients,
  receiptOf,
  mayDeliver,
  notFound,
  sizeHintOf,
  storedEnvelopeOf,
  typeHintOf,
  type Agent,
  type HeaderExtensions,
  type GuardFinding,
  type PostedEnvelope,
  type ReceiptClaim,
  type RecipientAgent,
} from '#domain';
import { AcceptBatcher, type AcceptJob } from './accept-batcher';
import { NO_RECIPIENTS, type Recipients, type RecipientWithState } from './auth.service';
import { ContentGuard } from './content-guard';
import { parsePostedEnvelope, resolveFileParts, searchTextOf } from './envelope-input';

/** The `202` body of ASMTP.md §2.5 step 8. */
export interface Accepted {
  id: string;
  received_ms: number;
  created_at: number;
  recipients: Array<{ handle: string }>;
  warnings?: unknown[];
}

export interface AcceptResult {
  accepted: Accepted;
  /** True for an idempotent replay: nothing was stored, pushed or claimed. */
  replay: boolean;
}

export interface AcceptOptions {
  extensions?: HeaderExtensions;
  /** Recipients already loaded with the sender (`SenderGuard`); any missing are loaded here. */
  recipients?: Recipients;
}

/**
 * The accept path of ASMTP.md §2.5, used by `POST /messages` and by every Roost feature that
 * sends (receipts, schedules): validate → expand recipients → policy (non-enumerating 404) →
 * commit (coalesced) → idempotency decision → publish header frames after commit.
 */
@Injectable()
export class AcceptService {
  constructor(
    private readonly agents: AgentsRepository,
    private readonly envelopes: EnvelopesRepository,
    private readonly receipts: ReceiptsRepository,
    private readonly guard: ContentGuard,
    private readonly batcher: AcceptBatcher,
    private readonly bus: FrameBus,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: Config,
  ) {}

  async accept(sender: Agent, input: Record<string, unknown>, options: AcceptOptions = {}): Promise<AcceptResult> {
    try {
      const result = await this.acceptKept(sender, input, options);
      this.metrics.envelopesAccepted.inc({ result: result.replay ? 'replay' : 'stored' });
      return result;
    } catch (error) {
      const status = error instanceof AsmtpError ? error.status : 500;
      this.metrics.envelopesAccepted.inc({ result: status < 500 ? 'refused' : 'failed' });
      throw error;
    }
  }

  /**
   * `acceptPosted`; when it refused a send admitted by a kept sender lookup (`Recipients.kept`),
   * the lookup is read afresh first, so a revoked token answers 401 whatever else was wrong (as
   * before anything was kept), and a refusal the lookup decided (404: the recipients' policy and
   * blocks; 422: the sender's content guard) is decided again on the fresh one. Other refusals
   * (400, 409) do not depend on it and stand.
   */
  private async acceptKept(
    sender: Agent,
    input: Record<string, unknown>,
    options: AcceptOptions,
  ): Promise<AcceptResult> {
    try {
      return await this.acceptPosted(sender, parsePostedEnvelope(input), options);
    } catch (error) {
      const reload = options.recipients?.kept ? options.recipients.reload : undefined;
      if (!reload || !(error instanceof AsmtpError) || error.status >= 500) throw error;
      const fresh = await this.reloaded(reload, options);
      if (error.status !== 404 && error.status !== 422) throw error;
      return this.acceptPosted(fresh.sender, parsePostedEnvelope(input), fresh.options);
    }
  }

  /**
   * Everything `accept` checks before storing (fields, receipt, recipients, policy), storing
   * nothing: a schedule's envelope is validated at creation "as if sent now" (EXTENSIONS.md §3).
   */
  async check(sender: Agent, input: Record<string, unknown>): Promise<PostedEnvelope> {
    const posted = parsePostedEnvelope(input);
    await this.prepare(sender, posted, {});
    return posted;
  }

  async acceptPosted(sender: Agent, posted: PostedEnvelope, options: AcceptOptions = {}): Promise<AcceptResult> {
    const prepareStart = performance.now();
    let { job, handles, warnings } = await this.prepare(sender, posted, options);
    this.metrics.acceptStages.prepare((performance.now() - prepareStart) / 1000);
    const withWarnings = (accepted: Accepted): Accepted => (warnings.length > 0 ? { ...accepted, warnings } : accepted);
    let reloaded = false;
    for (let attempt = 0; attempt < 3; attempt++) {
      const outcome = await this.batcher.submit(job);
      if (outcome.kind === 'policy_stale') {
        // The policy changed after the kept lookup that admitted this send: nothing was stored.
        // Look the sender and recipients up afresh (401 or 404 now, if the change says so) and
        // try again; a fresh lookup carries no epoch, so this happens once per send at most.
        this.metrics.acceptPolicyStale.inc();
        const reload = options.recipients?.reload;
        if (!reload || reloaded) throw new AsmtpError(503, 'UNAVAILABLE', 'policy changed during the send, retry');
        reloaded = true;
        ({ sender, options } = await this.reloaded(() => reload(true), options));
        ({ job, handles, warnings } = await this.prepare(sender, posted, options));
        attempt--; // not a contended id: the fresh lookup's attempt starts the count again
        continue;
      }
      if (outcome.kind === 'stored') {
        this.metrics.recipientsPerEnvelope.observe(job.recipients.length);
        const publishStart = performance.now();
        this.publish(job, posted, outcome.createdAt, outcome.header, outcome.entries, sender.id);
        this.metrics.acceptStages.publish((performance.now() - publishStart) / 1000);
        if (job.receipt) this.metrics.receipts.inc({ status: job.receipt.status });
        return {
          accepted: withWarnings({
            id: posted.id,
            received_ms: outcome.receivedMs,
            created_at: outcome.createdAt,
            recipients: handles.map((handle) => ({ handle })),
          }),
          replay: false,
        };
      }
      const existing = await this.envelopes.findStored(posted.id);
      if (!existing) continue; // deleted between our insert and this read: try again
      if (existing.sender_id !== sender.id) {
        throw new AsmtpError(409, 'ID_COLLISION', 'envelope id is already used by another sender');
      }
      if (existing.body !== job.body) {
        throw new AsmtpError(409, 'RETRY_MISMATCH', 'envelope id was already used with a different body');
      }
      return {
        accepted: withWarnings({
          id: existing.id,
          received_ms: existing.received_ms,
          created_at: existing.created_at,
          recipients: existing.recipients.map((handle) => ({ handle })),
        }),
        replay: true,
      };
    }
    throw new AsmtpError(503, 'UNAVAILABLE', 'envelope id is contended, retry');
  }

  /** The sender and recipients looked up afresh, in place of a kept lookup. */
  private async reloaded(
    reload: () => ReturnType<NonNullable<Recipients['reload']>>,
    options: AcceptOptions,
  ): Promise<{ sender: Agent; options: AcceptOptions }> {
    const fresh = await reload();
    return { sender: fresh.agent, options: { ...options, recipients: fresh.recipients } };
  }

  /** Validate everything about `posted` that needs the database, and build its accept job. */
  private async prepare(
    sender: Agent,
    posted: PostedEnvelope,
    options: AcceptOptions,
  ): Promise<{ job: AcceptJob; handles: string[]; warnings: GuardFinding[] }> {
    const handles = expandRecipients(posted.to, posted.cc);
    const receipt = receiptOf(posted.content_parts);
    if (receipt) await this.checkReceipt(sender, receipt, handles);
    const recipients = await this.admittedRecipients(sender, handles, options.recipients);
    const verdict = await this.guard.review(sender, posted);

    const { parts, fileIds } = resolveFileParts(posted.content_parts, this.config.publicUrl);
    const stored = storedEnvelopeOf(posted, sender.handle, parts);
    const to = new Set(posted.to);
    const extensions: HeaderExtensions = { ...options.extensions };
    if (receipt) extensions.receipt = { envelope_id: receipt.envelope_id, status: receipt.status };
    if (verdict.flags.length > 0) extensions.flags = verdict.flags;
    const job: AcceptJob = {
      envelopeId: posted.id,
      senderId: sender.id,
      recipients: recipients.map((agent) => ({
        agentId: agent.id,
        handle: agent.handle,
        kind: to.has(agent.handle) ? 'to' : 'cc',
        lastSeq: agent.last_seq ?? undefined,
        lastCreatedAt: agent.last_created_at ?? undefined,
      })),
      stored,
      body: JSON.stringify(stored),
      derived: { type_hint: typeHintOf(posted.content_parts), size_hint: sizeHintOf(posted.content_parts) },
      extensions,
      selfAddressed: handles.includes(sender.handle),
      searchText: searchTextOf(posted),
      fileIds,
      ...(receipt ? { receipt: { envelope_id: receipt.envelope_id, status: receipt.status } } : {}),
      ...(verdict.override ? { guardOverride: verdict.override } : {}),
      // Only a kept lookup's epoch is checked at commit: a fresh one is as new as before anything was kept.
      ...(options.recipients?.kept && options.recipients.policyEpoch !== undefined
        ? { policyEpoch: options.recipients.policyEpoch }
        : {}),
    };
    return { job, handles, warnings: verdict.warnings };
  }

  /**
   * A `roost.receipt/v1` part is only valid from a recipient of the envelope it answers, addressed
   * to that envelope's sender alone (EXTENSIONS.md §2): else 400 INVALID_RECEIPT.
   */
  private async checkReceipt(sender: Agent, receipt: ReceiptClaim, handles: string[]): Promise<void> {
    const parties = await this.receipts.parties(receipt.envelope_id, sender.id);
    if (!parties?.is_recipient)
      throw badRequest('INVALID_RECEIPT', 'the receipt answers an envelope you did not receive');
    if (handles.length !== 1 || handles[0] !== parties.sender_handle) {
      throw badRequest('INVALID_RECEIPT', "a receipt is addressed to the answered envelope's sender only");
    }
  }

  /**
   * Every recipient must exist, admit the sender under the symmetric allowlist and not block it;
   * any failure refuses the whole send with the same 404, before the duplicate-id check (§2.5).
   */
  private async admittedRecipients(
    sender: Agent,
    handles: string[],
    prefetched: Recipients = NO_RECIPIENTS,
  ): Promise<RecipientWithState[]> {
    const missing = handles.filter((handle) => handle !== sender.handle && !prefetched.agents.has(handle));
    const loaded = missing.length === 0 ? NO_RECIPIENTS : await this.loadRecipients(sender, missing);
    const recipients: RecipientWithState[] = [];
    for (const handle of handles) {
      if (handle === sender.handle) {
        // The sender's own row from its lookup, when named, carries its mailbox state; else unknown.
        const self = prefetched.agents.get(handle);
        recipients.push(self?.id === sender.id ? self : sender);
        continue;
      }
      const from = prefetched.agents.has(handle) ? prefetched : loaded;
      const recipient = from.agents.get(handle);
      if (!recipient || !mayDeliver(sender, recipient, from.blockedBy.includes(handle))) throw notFound();
      recipients.push(recipient);
    }
    return recipients;
  }

  /** Recipients the sender's lookup did not load (none named there, or a feature that sends). */
  private async loadRecipients(sender: Agent, handles: string[]): Promise<Recipients> {
    const agents = new Map<string, RecipientAgent>();
    const blockedBy: string[] = [];
    for (const recipient of await this.agents.findRecipients(handles, sender.handle)) {
      agents.set(recipient.handle, recipient);
      if (recipient.blocks_sender) blockedBy.push(recipient.handle);
    }
    return { agents, blockedBy };
  }

  private publish(
    job: AcceptJob,
    posted: PostedEnvelope,
    createdAt: number,
    header: string,
    entries: ReadonlyArray<{ mailboxId: number; seq: number }>,
    senderId: number,
  ): void {
    const frames = entries.map((entry) => ({
      mailbox_id: entry.mailboxId,
      seq: entry.seq,
      envelope_id: job.envelopeId,
      created_at: createdAt,
      header,
    }));
    const monitor =
      posted.monitor === undefined
        ? []
        : job.recipients.map((r) => ({
            mailbox_id: senderId,
            frame: JSON.stringify({
              op: 'monitor.fact',
              monitor: posted.monitor,
              envelope_id: job.envelopeId,
              recipient_handle: r.handle,
              fact: 'stored',
              at_ms: createdAt,
            }),
          }));
    // Best-effort by design (DESIGN.md, Fan-out): gateways backfill any gap from Postgres.
    this.bus.publish({ committed_at: Date.now(), frames, monitor }).catch(() => undefined);
  }
}
