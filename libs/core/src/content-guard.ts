import { Injectable, Logger } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { OrgsRepository } from '#db';
import { AsmtpError, ownerOf, scanContent, type Agent, type GuardFinding, type PostedEnvelope } from '#domain';
import { Metrics } from '#metrics';

export type GuardPolicy = 'off' | 'warn' | 'block';

export interface GuardVerdict {
  /** For the 202 body (`warnings`); empty when clean or off. */
  warnings: GuardFinding[];
  /** For headers and frames (`flags`): the distinct codes, in finding order. */
  flags: string[];
  /** Codes overridden with `allow_warnings` in block mode (recorded with the envelope). */
  override?: string[];
}

const CLEAN: GuardVerdict = { warnings: [], flags: [] };

/**
 * The content guard (EXTENSIONS.md §4): the sender's policy (agent override, else its
 * organization's, else `warn`) applied to what the detectors find. Content is never modified and
 * a finding never echoes what matched (the detectors' details are fixed strings).
 */
@Injectable()
export class ContentGuard {
  private readonly logger = new Logger('guard');

  constructor(
    private readonly orgs: OrgsRepository,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: Config,
  ) {}

  async review(sender: Agent, posted: PostedEnvelope): Promise<GuardVerdict> {
    if (sender.content_guard === 'off') return CLEAN;
    const findings = scanContent(
      { subject: posted.subject, parts: posted.content_parts },
      { largeBytes: this.config.guard.largeBytes },
    );
    if (findings.length === 0) return CLEAN;
    // Only content with findings pays for the policy lookup.
    const policy: GuardPolicy =
      sender.content_guard ?? (await this.orgs.find(ownerOf(sender.handle)))?.content_guard ?? 'warn';
    if (policy === 'off') return CLEAN;
    const flags = [...new Set(findings.map((finding) => finding.code))];
    if (policy === 'warn') {
      this.count(flags, 'warned');
      return { warnings: findings, flags };
    }
    const allowed = new Set(posted.allow_warnings ?? []);
    if (!flags.every((code) => allowed.has(code))) {
      this.count(flags, 'blocked');
      throw new AsmtpError(422, 'CONTENT_BLOCKED', 'content blocked by the content guard', { warnings: findings });
    }
    this.count(flags, 'overridden');
    this.logger.log(`content guard overridden by ${sender.handle} for ${flags.join(', ')}`);
    return { warnings: findings, flags, override: flags };
  }

  private count(codes: string[], outcome: string): void {
    for (const code of codes) this.metrics.guardFindings.inc({ code, outcome });
  }
}
