import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { FrameBus } from '#bus';
import type { AdminScope } from '#core';
import { adminAgentView } from '#domain';
import { JobQueueStats, type QueueCounts } from '#jobs';
import { ConsoleRepository } from './console.repository';
import type { AgentListQuery } from './console-query';

const MINUTE_MS = 60_000;
const TRAFFIC_MINUTES = 60;
const LARGEST_MAILBOXES = 10;
/** Redis reads of the overview wait at most this long; the rest of the answer does not wait. */
const REDIS_READ_TIMEOUT_MS = 1_000;

const ownerOf = (scope: AdminScope): string | undefined => (scope.kind === 'org' ? scope.org : undefined);

/**
 * The console's own admin reads (docs/console-api.md): who a token is, the paged agent search and
 * the overview. An organization admin sees only its organization's agents, traffic and mailboxes;
 * the dependencies and backlogs of the deployment are the operator's.
 */
@Injectable()
export class ConsoleService implements OnApplicationShutdown {
  constructor(
    private readonly console: ConsoleRepository,
    private readonly bus: FrameBus,
    /** null: no Redis (embedded), the jobs run on in-process timers. */
    @Inject(JobQueueStats) private readonly queues: JobQueueStats | null,
  ) {}

  whoami(scope: AdminScope) {
    return scope.kind === 'operator' ? { scope: 'operator' } : { scope: 'org', org: scope.org };
  }

  /** One page in handle order; `next` is the last handle when the page is full (a further page may exist). */
  async agents(scope: AdminScope, query: AgentListQuery) {
    // One more row than asked tells whether a next page exists, so a full last page ends with null.
    const rows = await this.console.searchAgents({
      owner: ownerOf(scope),
      needle: query.q,
      after: query.after,
      limit: query.limit + 1,
    });
    const page = rows.slice(0, query.limit);
    const unread = query.unread ? await this.console.unreadCounts(page.map((agent) => agent.id)) : undefined;
    return {
      agents: page.map((agent) =>
        unread ? { ...adminAgentView(agent), unread: unread.get(agent.id) ?? 0 } : adminAgentView(agent),
      ),
      next: rows.length > query.limit ? page.at(-1)!.handle : null,
    };
  }

  async overview(scope: AdminScope) {
    const owner = ownerOf(scope);
    const now = Date.now();
    const since = Math.floor(now / MINUTE_MS) * MINUTE_MS - (TRAFFIC_MINUTES - 1) * MINUTE_MS;
    const [traffic, largest, operator] = await Promise.all([
      this.console.traffic(owner, since),
      this.console.largestMailboxes(owner, LARGEST_MAILBOXES),
      scope.kind === 'operator' ? this.deployment() : Promise.resolve(null),
    ]);
    const perMinute = new Map(traffic.map((row) => [row.minute, row.envelopes]));
    return {
      dependencies: operator?.dependencies ?? null,
      traffic: Array.from({ length: TRAFFIC_MINUTES }, (_, i) => {
        const minute = since + i * MINUTE_MS;
        return { minute: new Date(minute).toISOString(), envelopes: perMinute.get(minute) ?? 0 };
      }),
      backlogs: operator?.backlogs ?? null,
      largest_mailboxes: largest,
      ...(operator ? { embedded: operator.embedded } : {}),
    };
  }

  /** Dependencies and backlogs: Postgres answered (the queries above ran), Redis asked with a bound. */
  private async deployment() {
    const embedded = !this.queues;
    const [redis, streams, queues] = await Promise.all([
      bounded(this.bus.ready()),
      bounded(this.bus.stats()),
      this.queues ? this.queues.counts() : Promise.resolve<QueueCounts[]>([]),
    ]);
    return {
      embedded,
      dependencies: { postgres: await this.console.ping(), redis: redis === true },
      backlogs: {
        streams: (streams ?? []).map((stream) => ({
          partition: stream.partition,
          length: stream.length,
          lag: stream.lagEntries ?? 0,
        })),
        queues: (queues ?? []).map(({ queue, waiting, delayed, failed }) => ({ queue, waiting, delayed, failed })),
      },
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.queues?.close();
  }
}

/** The answer, or null on failure or past REDIS_READ_TIMEOUT_MS. */
async function bounded<T>(ask: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), REDIS_READ_TIMEOUT_MS)));
  try {
    return await Promise.race([ask.catch(() => null), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
