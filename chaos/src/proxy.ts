import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy between Roost and Postgres or Redis, so that network faults can be
 * injected at any moment without root, namespaces or `tc`:
 *
 * - `setDelay(ms, jitterMs)`: every chunk waits `ms` (± jitter) in each direction, in order;
 * - `partition()`: a blackhole. Nothing is read or forwarded on open connections (TCP backpressure
 *   stalls both peers, as when packets are dropped), new connections are accepted but not
 *   connected upstream; `heal()` resumes everything, as TCP retransmission would after a real
 *   partition heals;
 * - `cut()`: every open connection is reset (RST) and new ones are refused (the proxy stops
 *   listening: the kernel answers RST) until `heal()` (a firewall REJECT, or a NAT/load balancer
 *   dropping its flow table).
 *
 * With no fault active a chunk is written straight through (no timer, no copy, TCP backpressure
 * kept), so the proxy costs one extra loopback hop.
 */
export class TcpProxy {
  private readonly links = new Set<Link>();
  private delayMs = 0;
  private jitterMs = 0;
  private mode: 'pass' | 'partition' | 'cut' = 'pass';
  /** Connections accepted so far, and those reset by `cut`. */
  accepted = 0;
  resets = 0;

  private constructor(
    readonly name: string,
    private readonly server: Server,
    readonly port: number,
    private readonly upstreamPort: number,
    private readonly upstreamHost: string,
  ) {}

  static async start(name: string, upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = createServer({ noDelay: true }, (socket) => proxy?.accept(socket));
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', fail);
        done();
      });
    });
    server.on('error', (error) => process.stderr.write(`proxy ${name}: ${error.message}\n`));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy: no port');
    proxy = new TcpProxy(name, server, address.port, upstreamPort, upstreamHost);
    return proxy;
  }

  get url(): string {
    return `127.0.0.1:${this.port}`;
  }

  get open(): number {
    return this.links.size;
  }

  get fault(): 'pass' | 'partition' | 'cut' | 'delay' {
    return this.mode === 'pass' && this.delayMs + this.jitterMs > 0 ? 'delay' : this.mode;
  }

  /** The delay of the next chunk (0 when no delay is set). */
  delay(): number {
    if (this.delayMs === 0 && this.jitterMs === 0) return 0;
    return Math.max(0, this.delayMs + (Math.random() * 2 - 1) * this.jitterMs);
  }

  get partitioned(): boolean {
    return this.mode === 'partition';
  }

  setDelay(ms: number, jitterMs = 0): void {
    this.delayMs = Math.max(0, ms);
    this.jitterMs = Math.max(0, jitterMs);
  }

  partition(): void {
    if (this.mode === 'cut') return;
    this.mode = 'partition';
    for (const link of this.links) link.pause();
  }

  cut(): void {
    if (this.mode !== 'cut') this.server.close(); // new connections: refused by the kernel
    this.mode = 'cut';
    for (const link of [...this.links]) {
      this.resets++;
      link.reset();
    }
  }

  /** End every fault: no delay, resume stalled connections, accept new ones. */
  heal(): void {
    this.setDelay(0);
    if (this.mode === 'cut') this.server.listen(this.port, '127.0.0.1');
    this.mode = 'pass';
    for (const link of [...this.links]) link.resume();
  }

  async close(): Promise<void> {
    for (const link of [...this.links]) link.destroy();
    if (this.server.listening) await new Promise<void>((done) => this.server.close(() => done()));
  }

  private accept(client: Socket): void {
    this.accepted++;
    const link = new Link(this, client, () =>
      connect({ port: this.upstreamPort, host: this.upstreamHost, noDelay: true }),
    );
    this.links.add(link);
    link.onClose = () => this.links.delete(link);
    if (this.mode === 'partition') link.pause();
    else link.resume();
  }
}

/** One proxied connection: the client socket, its upstream socket (once connected) and two flows. */
class Link {
  private upstream: Socket | undefined;
  private up: Flow | undefined;
  private down: Flow | undefined;
  private closed = false;
  onClose: () => void = () => undefined;

  constructor(
    private readonly proxy: TcpProxy,
    private readonly client: Socket,
    private readonly dial: () => Socket,
  ) {
    client.pause();
    client.on('error', () => this.destroy());
    client.on('close', () => this.destroy());
  }

  pause(): void {
    this.client.pause();
    this.upstream?.pause();
    this.up?.hold();
    this.down?.hold();
  }

  resume(): void {
    if (this.closed) return;
    if (!this.upstream) {
      // Connect upstream only now (a connection made during a partition waits for the heal).
      const upstream = this.dial();
      this.upstream = upstream;
      upstream.on('error', () => this.destroy());
      upstream.on('close', () => this.destroy());
      this.up = new Flow(this.proxy, this.client, upstream);
      this.down = new Flow(this.proxy, upstream, this.client);
    }
    this.up!.release();
    this.down!.release();
  }

  reset(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.resetAndDestroy();
    this.upstream?.resetAndDestroy();
    this.onClose();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.destroy();
    this.upstream?.destroy();
    this.onClose();
  }
}

/** Bytes from one socket to the other, straight through or delayed in order; held while partitioned. */
class Flow {
  private readonly queue: Array<{ due: number; chunk: Buffer | null }> = [];
  private queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private held = false;
  private waitingDrain = false;

  constructor(
    private readonly proxy: TcpProxy,
    private readonly from: Socket,
    private readonly to: Socket,
  ) {
    from.on('data', (chunk: Buffer) => this.data(chunk));
    from.on('end', () => this.push(null));
    to.on('drain', () => {
      this.waitingDrain = false;
      this.flush();
    });
  }

  hold(): void {
    this.held = true;
    this.from.pause();
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  release(): void {
    this.held = false;
    this.flush();
  }

  private data(chunk: Buffer): void {
    if (this.held) {
      this.push(chunk); // read before the pause took effect: keep it for the heal
      return;
    }
    const delay = this.proxy.delay();
    if (delay === 0 && this.queue.length === 0 && !this.waitingDrain) {
      if (!this.to.write(chunk)) {
        this.waitingDrain = true;
        this.from.pause();
      }
      return;
    }
    this.push(chunk, delay);
  }

  private push(chunk: Buffer | null, delay = this.proxy.delay()): void {
    // In order: a chunk never overtakes one queued before it, whatever the jitter.
    const last = this.queue.length > 0 ? this.queue[this.queue.length - 1].due : 0;
    this.queue.push({ due: Math.max(Date.now() + delay, last), chunk });
    this.queued += chunk?.length ?? 0;
    if (this.queued > 1 << 20) this.from.pause();
    this.flush();
  }

  private flush(): void {
    if (this.held || this.waitingDrain) return;
    const now = Date.now();
    while (this.queue.length > 0 && this.queue[0].due <= now) {
      const { chunk } = this.queue.shift()!;
      if (chunk === null) {
        this.to.end();
        return;
      }
      this.queued -= chunk.length;
      if (!this.to.write(chunk)) {
        this.waitingDrain = true;
        return;
      }
    }
    if (this.queue.length > 0) {
      if (!this.timer) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.flush();
        }, this.queue[0].due - now);
      }
      return;
    }
    if (this.queued <= 1 << 20 && !this.held) this.from.resume();
  }
}
