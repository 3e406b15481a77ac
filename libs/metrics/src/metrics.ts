import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { LeanCounter } from './lean-counter';
import { LeanHistogram } from './lean-histogram';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Every Roost metric, on one registry per process, named `roost_<noun>_<unit>`. Labels are
 * bounded: never a handle, token or envelope id.
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new LeanCounter({
    name: 'roost_http_requests_total',
    help: 'HTTP requests by route template, method and status.',
    labelNames: ['route', 'method', 'status'],
    registers: [this.registry],
  });

  readonly httpDuration = new LeanHistogram({
    name: 'roost_http_request_duration_seconds',
    help: 'HTTP request duration by route template and method.',
    labelNames: ['route', 'method'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly envelopesAccepted = new LeanCounter({
    name: 'roost_envelopes_accepted_total',
    help: 'POST /messages outcomes: stored, replay, refused (4xx), failed (5xx).',
    labelNames: ['result'],
    registers: [this.registry],
  });

  readonly recipientsPerEnvelope = new LeanHistogram({
    name: 'roost_envelope_recipients',
    help: 'Recipients per stored envelope.',
    buckets: [1, 2, 5, 10, 25, 50, 100, 500],
    registers: [this.registry],
  });

  readonly acceptBatchSize = new LeanHistogram({
    name: 'roost_accept_batch_envelopes',
    help: 'Envelopes committed per shared accept transaction.',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });

  readonly acceptStage = new LeanHistogram({
    name: 'roost_accept_stage_seconds',
    help: 'Where a send spends its time, by stage: auth (token and recipients lookup), prepare (validate, policy, guard), queue (waiting for a writer or a busy mailbox), write (the accept statement to its commit), publish (frames handed to the bus).',
    labelNames: ['stage'],
    buckets: [0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 1, 5],
    registers: [this.registry],
  });

  /** `acceptStage` bound to each stage: every send observes each of them once. */
  readonly acceptStages = {
    auth: this.acceptStage.bind({ stage: 'auth' }),
    prepare: this.acceptStage.bind({ stage: 'prepare' }),
    queue: this.acceptStage.bind({ stage: 'queue' }),
    write: this.acceptStage.bind({ stage: 'write' }),
    publish: this.acceptStage.bind({ stage: 'publish' }),
  };

  readonly acceptQueueExpired = new LeanCounter({
    name: 'roost_accept_queue_expired_total',
    help: 'Accepts answered 503 because they waited in the accept queue longer than the statement timeout (a mailbox held by a batch stuck on a lock, or every writer busy).',
    registers: [this.registry],
  });

  readonly acceptLockFallbacks = new LeanCounter({
    name: 'roost_accept_lock_fallbacks_total',
    help: 'Accept batches whose lock-free statement found a mailbox moved on by another writer and took the locking path.',
    registers: [this.registry],
  });

  readonly mailboxListDuration = new LeanHistogram({
    name: 'roost_mailbox_list_duration_seconds',
    help: 'GET /mailbox listing duration by direction.',
    labelNames: ['direction'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly dbPool = new Gauge({
    name: 'roost_db_pool_connections',
    help: 'Postgres pool connections by state (in_use, idle, waiting).',
    labelNames: ['state'],
    registers: [this.registry],
  });

  readonly dbQueryDuration = new LeanHistogram({
    name: 'roost_db_query_duration_seconds',
    help: 'Postgres query duration (every query Kysely runs).',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly dbSyncs = new LeanCounter({
    name: 'roost_db_syncs_total',
    help: 'Embedded PGlite: fsyncs of its files to the host disk by kind (wal: at each commit; data, dir: checkpoints, file creation).',
    labelNames: ['kind'],
    registers: [this.registry],
  });

  readonly redisErrors = new LeanCounter({
    name: 'roost_redis_errors_total',
    help: 'Failed Redis commands by component.',
    labelNames: ['component'],
    registers: [this.registry],
  });

  readonly wsConnections = new Gauge({
    name: 'roost_ws_connections',
    help: 'Open /connect WebSocket connections on this gateway.',
    registers: [this.registry],
  });

  readonly framesSent = new LeanCounter({
    name: 'roost_ws_frames_sent_total',
    help: 'Frames written to sockets by kind (notify, monitor, replay, control).',
    labelNames: ['kind'],
    registers: [this.registry],
  });

  readonly replayedFrames = new LeanCounter({
    name: 'roost_ws_replayed_frames_total',
    help: 'Headers replayed from Postgres on server-side resume.',
    registers: [this.registry],
  });

  readonly backfills = new LeanCounter({
    name: 'roost_ws_backfills_total',
    help: 'Gaps in a mailbox sequence filled from Postgres, by cause (gap, sweep).',
    labelNames: ['cause'],
    registers: [this.registry],
  });

  readonly wsClosed = new LeanCounter({
    name: 'roost_ws_closed_total',
    help: 'Sockets closed by the server, by reason (slow_consumer, revoked, ping_timeout, drain, error).',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  readonly slowConsumerCloses = new LeanCounter({
    name: 'roost_ws_slow_consumer_closes_total',
    help: 'Sockets closed 4008 because their send buffer stayed past ROOST_WS_MAX_BUFFERED_BYTES (the client resumes from its cursor).',
    registers: [this.registry],
  });

  readonly buildInfo = new Gauge({
    name: 'roost_build_info',
    help: 'Always 1: the version this process runs and the node (host name) it runs on.',
    labelNames: ['version', 'node'],
    registers: [this.registry],
  });

  readonly dependencyUp = new Gauge({
    name: 'roost_dependency_up',
    help: 'Whether a dependency answered its last check (1) or not (0), checked every few seconds: postgres, redis.',
    labelNames: ['dependency'],
    registers: [this.registry],
  });

  readonly streamLength = new Gauge({
    name: 'roost_stream_length',
    help: 'Entries in each frame stream partition (XLEN), read at scrape.',
    labelNames: ['partition'],
    registers: [this.registry],
  });

  readonly streamLag = new Gauge({
    name: 'roost_stream_lag_entries',
    help: 'Entries of a partition this gateway holds that it has not read yet (counted up to 10000), read at scrape.',
    labelNames: ['partition'],
    registers: [this.registry],
  });

  readonly jobs = new Gauge({
    name: 'roost_jobs',
    help: 'BullMQ jobs by queue and state (waiting, active, failed, delayed), read at scrape (worker role with Redis).',
    labelNames: ['queue', 'state'],
    registers: [this.registry],
  });

  readonly wsHandshakes = new LeanCounter({
    name: 'roost_ws_handshakes_total',
    help: '/connect handshakes by outcome (accepted, unauthorized, refused, rate_limited).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly replays = new Gauge({
    name: 'roost_ws_replays',
    help: 'Resume replays on this gateway by state (active, waiting for a slot).',
    labelNames: ['state'],
    registers: [this.registry],
  });

  readonly rateLimited = new LeanCounter({
    name: 'roost_rate_limited_total',
    help: 'Requests and handshakes refused 429 RATE_LIMITED, by limit (agent, auth_fail, ws).',
    labelNames: ['limit'],
    registers: [this.registry],
  });

  readonly keptSenderLookups = new LeanCounter({
    name: 'roost_auth_kept_lookups_total',
    help: 'Sends admitted by a kept sender lookup (no database read; the commit checks the policy epoch).',
    registers: [this.registry],
  });

  readonly acceptPolicyStale = new LeanCounter({
    name: 'roost_accept_policy_stale_total',
    help: 'Sends whose kept sender lookup was older than the policy epoch at commit: looked up again and retried.',
    registers: [this.registry],
  });

  readonly unknownTokenHits = new LeanCounter({
    name: 'roost_auth_unknown_token_hits_total',
    help: 'Bearer tokens refused from the recently-unknown cache without a database lookup.',
    registers: [this.registry],
  });

  readonly streamReadLag = new LeanHistogram({
    name: 'roost_stream_read_lag_seconds',
    help: 'Age of frames when a gateway reads them from the Redis stream.',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly commitToSocket = new LeanHistogram({
    name: 'roost_commit_to_socket_seconds',
    help: 'Time from accept commit to the header frame written on a socket.',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly receipts = new LeanCounter({
    name: 'roost_receipts_total',
    help: 'Receipts stored, by status.',
    labelNames: ['status'],
    registers: [this.registry],
  });

  readonly guardFindings = new LeanCounter({
    name: 'roost_guard_findings_total',
    help: 'Content guard findings by code and outcome (warned, blocked, overridden).',
    labelNames: ['code', 'outcome'],
    registers: [this.registry],
  });

  readonly jobDuration = new LeanHistogram({
    name: 'roost_job_duration_seconds',
    help: 'Worker job run duration by job.',
    labelNames: ['name'],
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60],
    registers: [this.registry],
  });

  readonly jobFailures = new LeanCounter({
    name: 'roost_job_failures_total',
    help: 'Worker job runs that failed, by job.',
    labelNames: ['name'],
    registers: [this.registry],
  });

  readonly scheduleFirings = new LeanCounter({
    name: 'roost_schedule_firings_total',
    help: 'Schedule firings by result (sent, replayed, refused, error).',
    labelNames: ['result'],
    registers: [this.registry],
  });

  readonly scheduleLag = new Gauge({
    name: 'roost_schedule_lag_seconds',
    help: 'Now minus the oldest next_run_at among due active schedules (0 when none is due).',
    registers: [this.registry],
  });

  readonly purgedRows = new LeanCounter({
    name: 'roost_retention_purged_rows_total',
    help: 'Rows removed by retention, by table (mailbox_entries, envelopes, agents: tombstones of deleted agents, freeing their handles).',
    labelNames: ['table'],
    registers: [this.registry],
  });

  readonly adminReads = new LeanCounter({
    name: 'roost_admin_reads_total',
    help: "Admin reads of an agent's data (console) by route: mailbox, message, receipts, status, file, schedules, events.",
    labelNames: ['route'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    for (const outcome of ['accepted', 'unauthorized', 'refused', 'rate_limited'])
      this.wsHandshakes.inc({ outcome }, 0);
    for (const limit of ['agent', 'auth_fail', 'ws']) this.rateLimited.inc({ limit }, 0);
    for (const state of ['active', 'waiting']) this.replays.set({ state }, 0);
  }
}
