import { Injectable } from '@nestjs/common';
import { FrameBus } from '#bus';
import { InjectConfig, type Config } from '#config';
import { RetentionRepository } from '#db';
import type { Cursor } from '#domain';
import { Metrics } from '#metrics';

const DAY_MS = 24 * 60 * 60 * 1000;
/** Frames older than this are of no use to any gateway (they backfill from Postgres). */
const STREAM_MAX_AGE_MS = 60 * 60 * 1000;

/**
 * Retention (EXTENSIONS.md §6): mailbox entries older than the mailbox's limit, then envelopes no
 * mailbox holds any more and older than their sender's limit, each in bounded batches; then those
 * of deleted senders that no mailbox holds (whatever their age: nobody can read them), releasing
 * each deleted sender's handle once none is left (§5); then the frame streams are trimmed by age.
 */
@Injectable()
export class RetentionProcessor {
  constructor(
    private readonly retention: RetentionRepository,
    private readonly bus: FrameBus,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: Config,
  ) {}

  async purge(now: number = Date.now()): Promise<{ entries: number; envelopes: number; handles: number }> {
    const batch = this.config.retention.batchSize;
    let entries = 0;
    let envelopes = 0;
    const policies = await this.retention.policies();
    for (const policy of policies) {
      const cutoff = now - policy.retention_days * DAY_MS;
      for (;;) {
        const purged = await this.retention.purgeEntries(policy.agent_id, cutoff, batch);
        entries += purged;
        this.metrics.purgedRows.inc({ table: 'mailbox_entries' }, purged);
        if (purged < batch) break;
      }
    }
    for (const policy of policies) {
      const cutoff = now - policy.retention_days * DAY_MS;
      let after: Cursor | null = null;
      for (;;) {
        const step = await this.retention.purgeEnvelopes(policy.agent_id, cutoff, batch, after);
        envelopes += step.purged;
        this.metrics.purgedRows.inc({ table: 'envelopes' }, step.purged);
        if (step.examined < batch) break;
        after = step.last;
      }
    }
    const deleted = await this.purgeDeletedSenders(batch);
    envelopes += deleted.envelopes;
    await this.bus.trim(STREAM_MAX_AGE_MS).catch(() => 0);
    return { entries, envelopes, handles: deleted.handles };
  }

  private async purgeDeletedSenders(batch: number): Promise<{ envelopes: number; handles: number }> {
    let envelopes = 0;
    let handles = 0;
    let afterId = 0;
    for (;;) {
      const senders = await this.retention.deletedAgents(afterId, batch);
      for (const senderId of senders) {
        let after: Cursor | null = null;
        for (;;) {
          const step = await this.retention.purgeEnvelopes(senderId, Number.MAX_SAFE_INTEGER, batch, after);
          envelopes += step.purged;
          this.metrics.purgedRows.inc({ table: 'envelopes' }, step.purged);
          if (step.examined < batch) break;
          after = step.last;
        }
      }
      const released = await this.retention.releaseHandles(senders);
      handles += released;
      if (released > 0) this.metrics.purgedRows.inc({ table: 'agents' }, released);
      if (senders.length < batch) return { envelopes, handles };
      afterId = senders[senders.length - 1];
    }
  }
}
