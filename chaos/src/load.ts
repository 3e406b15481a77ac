import { ulid } from '#domain';
import { type Random, request, sleep } from './util';

export interface Agent {
  handle: string;
  token: string;
}

export interface Attempt {
  at: number;
  /** Index of the api node asked. */
  api: number;
  /** HTTP status; 0 = no answer (refused, reset, timed out). */
  status: number;
  code?: string;
  ms: number;
}

/** One envelope the load generator tried to send, with every attempt (retries reuse id and body). */
export interface Send {
  id: string;
  sender: string;
  to: string[];
  cc: string[];
  attempts: Attempt[];
  /** The first 202 body, if any attempt got one. */
  accepted?: { created_at: number; received_ms: number; recipients: string[]; at: number; attempt: number };
  /** Set once no more attempts will be made. */
  done: boolean;
  /** From the final burst (after faults), which must be 202 at the first attempt. */
  burst: boolean;
}

/** Retry pauses after a failed attempt (no answer or 5xx): the same id and byte-identical body. */
const RETRY_DELAYS_MS = [500, 1_000, 2_000, 3_000, 4_000];

/**
 * How long an api that failed a request stays out of rotation. A client that kept connecting to a
 * draining api met kernel resets when its listener closed (connections still in the accept queue):
 * a real load balancer stops routing to a node that refuses or answers the drain's 503 (Envoy's
 * outlier detection ejects for 30 s; 3 s was shorter than a drain at load 30).
 */
const EJECT_MS = 10_000;

/**
 * A steady-rate sender: every `1/rate` s a new envelope from a random sender to one or two random
 * recipients (sometimes a cc), through a random api node in rotation. An attempt without an answer
 * or with a 5xx is retried with the same id and body like a careful client, and takes that api out
 * of rotation for EJECT_MS; every attempt is recorded.
 */
export class LoadGenerator {
  readonly sends: Send[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;
  offered = 0;
  startedAt = 0;
  stoppedAt = 0;

  constructor(
    private readonly apis: () => string[],
    private readonly senders: Agent[],
    private readonly recipients: Agent[],
    private readonly random: Random,
  ) {}

  /** Send at `ratePerS` until `stop()`. */
  async run(ratePerS: number): Promise<void> {
    this.startedAt = Date.now();
    for (let n = 0; !this.stopped; n++) {
      const due = this.startedAt + (n * 1000) / ratePerS;
      const late = Date.now() - due;
      if (late < 0) await sleep(-late);
      else {
        // Behind (a starved machine): without a yield the catch-up started thousands of sends in
        // one synchronous burst and no answer was read meanwhile (seen at load 18: 6 of 6,732
        // accepted). Slots over a second late are dropped: offered_per_s shows the shortfall.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (late > 1_000) n += Math.floor(((late - 1_000) * ratePerS) / 1000);
      }
      if (this.stopped) break;
      this.offered++;
      this.track(this.send(this.envelope(false)));
    }
    this.stoppedAt = Date.now();
  }

  stop(): void {
    this.stopped = true;
  }

  /** Wait for every send to finish its retries. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** `count` sends with `concurrency` in flight, no retries: every one must be 202. */
  async burst(count: number, concurrency: number): Promise<Send[]> {
    const burst: Send[] = [];
    let next = 0;
    const worker = async () => {
      while (next++ < count) {
        const send = this.envelope(true);
        burst.push(send);
        await this.attempt(send, JSON.stringify(this.body(send)));
        send.done = true;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return burst;
  }

  private track(promise: Promise<void>): void {
    this.inFlight.add(promise);
    void promise.finally(() => this.inFlight.delete(promise));
  }

  private envelope(burst: boolean): Send {
    const sender = this.random.pick(this.senders);
    const [first, second] = this.random.shuffle(this.recipients);
    const shape = this.random.next();
    const to = shape < 0.6 ? [first.handle] : shape < 0.85 ? [first.handle, second.handle] : [first.handle];
    const cc = shape >= 0.85 ? [second.handle] : [];
    const send: Send = { id: ulid(), sender: sender.handle, to, cc, attempts: [], done: false, burst };
    this.sends.push(send);
    return send;
  }

  private body(send: Send): Record<string, unknown> {
    return {
      id: send.id,
      to: send.to,
      ...(send.cc.length > 0 ? { cc: send.cc } : {}),
      date_ms: Date.now(),
      subject: `chaos ${send.id.slice(-6)}`,
      content_parts: [{ type: 'text', text: `chaos envelope ${send.id} from ${send.sender}` }],
    };
  }

  private async send(send: Send): Promise<void> {
    const body = JSON.stringify(this.body(send)); // byte-identical on every retry
    for (let attempt = 0; ; attempt++) {
      const status = await this.attempt(send, body);
      if (status === 202 || (status >= 400 && status < 500) || attempt >= RETRY_DELAYS_MS.length || this.hardStop)
        break;
      await sleep(RETRY_DELAYS_MS[attempt] * this.random.between(0.8, 1.2));
    }
    send.done = true;
  }

  /** Set at the very end: no more retries. */
  hardStop = false;

  /** Per api index: until when it is out of rotation. */
  private readonly ejectedUntil = new Map<number, number>();

  private async attempt(send: Send, body: string): Promise<number> {
    const apis = this.apis();
    // A load balancer's passive health check: an api that just failed a request (a refusal, a
    // reset, a 503, e.g. the drain's) is out of rotation for EJECT_MS while another is in it.
    const inRotation = apis.map((_, i) => i).filter((i) => (this.ejectedUntil.get(i) ?? 0) <= Date.now());
    const api = inRotation.length > 0 ? this.random.pick(inRotation) : this.random.int(0, apis.length - 1);
    const token = this.senders.find((s) => s.handle === send.sender)!.token;
    const at = Date.now();
    let status = 0;
    let code: string | undefined;
    try {
      const reply = await request('POST', `${apis[api]}/messages`, { token, body, timeoutMs: 20_000 });
      status = reply.status;
      code = reply.body?.error?.code;
      if (status === 202 && !send.accepted) {
        send.accepted = {
          created_at: reply.body.created_at,
          received_ms: reply.body.received_ms,
          recipients: (reply.body.recipients ?? []).map((r: { handle: string }) => r.handle),
          at: Date.now(),
          attempt: send.attempts.length,
        };
      }
    } catch (error) {
      code = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name;
    }
    send.attempts.push({ at, api, status, ...(code ? { code } : {}), ms: Date.now() - at });
    if (status === 0 || status >= 500) this.ejectedUntil.set(api, Date.now() + EJECT_MS);
    return status;
  }
}
