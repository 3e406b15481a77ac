import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * A tiny loopback reverse proxy for testing (no http-proxy): each HTTP request goes to the next
 * api node (round robin), each `/connect` WebSocket upgrade to the next gateway, bytes piped both
 * ways. Optional faults rewrite responses and frames, to show that the conformance suite fails
 * against a broken operator.
 */

export const FAULTS = {
  /** GET /mailbox: drop `next_cursor` when it is null (the CLI's listen loop would never end). */
  'drop-next-cursor': 'GET /mailbox answers without next_cursor when it is null',
  /** GET /mailbox and push frames: header keys in alphabetical order instead of the reference order. */
  'reorder-header-keys': 'header objects (listings and push frames) with their keys sorted alphabetically',
  /** POST /messages: 200 instead of 202. */
  'status-200': 'POST /messages answers 200 instead of 202',
  /** Push frames: a content_parts key leaks into envelope.notify. */
  'leak-content-parts': 'envelope.notify frames carry content_parts',
} as const;

export type Fault = keyof typeof FAULTS;

export interface ProxyOptions {
  apis: string[];
  gateways: string[];
  /** Port to listen on (0 = any). */
  port?: number;
  faults?: Fault[];
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade']);

function withoutHopByHop(raw: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!HOP_BY_HOP.has(raw[i].toLowerCase())) out.push(raw[i], raw[i + 1]);
  return out;
}

const target = (url: string) => {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 80) };
};

export class Proxy {
  readonly faults: Set<Fault>;
  private nextApi = 0;
  private nextGateway = 0;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  private readonly sockets = new Set<Duplex>();
  /** Requests forwarded per upstream URL. */
  readonly counts = new Map<string, number>();

  private constructor(
    private readonly server: http.Server,
    readonly options: ProxyOptions,
  ) {
    this.faults = new Set(options.faults ?? []);
  }

  static async start(options: ProxyOptions): Promise<Proxy> {
    if (options.apis.length === 0 || options.gateways.length === 0)
      throw new Error('a proxy needs at least one api and one gateway');
    const server = http.createServer();
    const proxy = new Proxy(server, options);
    server.on('request', (req, res) => proxy.forward(req, res));
    server.on('upgrade', (req, socket, head) => proxy.upgrade(req, socket, head));
    server.on('connection', (socket) => {
      proxy.sockets.add(socket);
      socket.on('close', () => proxy.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private count(upstream: string): void {
    this.counts.set(upstream, (this.counts.get(upstream) ?? 0) + 1);
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const upstream = this.options.apis[this.nextApi++ % this.options.apis.length];
    this.count(upstream);
    const upstreamReq = http.request(
      {
        ...target(upstream),
        method: req.method,
        path: req.url,
        headers: withoutHopByHop(req.rawHeaders),
        agent: this.agent,
      },
      (upstreamRes) => this.respond(req, res, upstreamRes),
    );
    upstreamReq.on('error', (error) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const body = JSON.stringify({
        error: { code: 'BAD_GATEWAY', message: `upstream ${upstream}: ${error.message}` },
      });
      res.writeHead(502, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    });
    req.pipe(upstreamReq);
  }

  private respond(req: IncomingMessage, res: ServerResponse, upstreamRes: IncomingMessage): void {
    res.sendDate = false;
    const raw = withoutHopByHop(upstreamRes.rawHeaders);
    const json = /^application\/json/i.test(String(upstreamRes.headers['content-type'] ?? ''));
    if (this.faults.size === 0 || !json) {
      res.writeHead(upstreamRes.statusCode ?? 502, raw);
      upstreamRes.pipe(res);
      return;
    }
    const chunks: Buffer[] = [];
    upstreamRes.on('data', (chunk: Buffer) => chunks.push(chunk));
    upstreamRes.on('end', () => {
      const rewritten = this.rewriteResponse(
        req.method ?? 'GET',
        req.url ?? '/',
        upstreamRes.statusCode ?? 502,
        Buffer.concat(chunks),
      );
      const headers: string[] = [];
      for (let i = 0; i < raw.length; i += 2)
        if (raw[i].toLowerCase() !== 'content-length') headers.push(raw[i], raw[i + 1]);
      headers.push('Content-Length', String(rewritten.body.length));
      res.writeHead(rewritten.status, headers);
      res.end(rewritten.body);
    });
  }

  private rewriteResponse(method: string, url: string, status: number, body: Buffer): { status: number; body: Buffer } {
    const path = url.split('?')[0];
    let parsed: any;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return { status, body };
    }
    let changed = false;
    if (method === 'GET' && path === '/mailbox' && status === 200) {
      if (this.faults.has('drop-next-cursor') && parsed.next_cursor === null) {
        delete parsed.next_cursor;
        changed = true;
      }
      if (this.faults.has('reorder-header-keys') && Array.isArray(parsed.envelope_headers)) {
        parsed.envelope_headers = parsed.envelope_headers.map(sortKeys);
        changed = true;
      }
    }
    if (this.faults.has('status-200') && method === 'POST' && path === '/messages' && status === 202) status = 200;
    return { status, body: changed ? Buffer.from(JSON.stringify(parsed)) : body };
  }

  private rewriteFrame(text: string): string {
    let frame: any;
    try {
      frame = JSON.parse(text);
    } catch {
      return text;
    }
    if (frame?.op !== 'envelope.notify') return text;
    if (this.faults.has('leak-content-parts')) frame.content_parts = [{ type: 'text', text: '(leaked body)' }];
    if (this.faults.has('reorder-header-keys')) frame = sortKeys(frame);
    return JSON.stringify(frame);
  }

  private upgrade(req: IncomingMessage, client: Duplex, head: Buffer): void {
    const upstream = this.options.gateways[this.nextGateway++ % this.options.gateways.length];
    this.count(upstream);
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => undefined);
    const gateway = net.connect(target(upstream), () => {
      let request = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        request += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      gateway.write(`${request}\r\n`);
      if (head.length > 0) gateway.write(head);
      client.pipe(gateway);
      if (this.faults.has('leak-content-parts') || this.faults.has('reorder-header-keys')) {
        const frames = new FrameRewriter((text) => this.rewriteFrame(text));
        gateway.on('data', (chunk: Buffer) => {
          const out = frames.push(chunk);
          if (out.length > 0 && !client.write(out)) {
            gateway.pause();
            client.once('drain', () => gateway.resume());
          }
        });
        gateway.on('end', () => client.end());
      } else {
        gateway.pipe(client);
      }
    });
    this.sockets.add(gateway);
    gateway.on('close', () => {
      this.sockets.delete(gateway);
      client.destroy();
    });
    gateway.on('error', () => client.destroy());
    client.on('close', () => gateway.destroy());
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function sortKeys(object: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(object)
      .sort()
      .map((key) => [key, object[key]]),
  );
}

/**
 * Rewrites unmasked server→client WebSocket text frames after the HTTP 101 head; every other
 * byte (the head, control and binary frames) passes through unchanged.
 */
class FrameRewriter {
  private headDone = false;
  /** The upgrade was refused (not 101): the rest is an HTTP body, passed through. */
  private passThrough = false;
  private buffer = Buffer.alloc(0);

  constructor(private readonly rewrite: (text: string) => string) {}

  push(chunk: Buffer): Buffer {
    if (this.passThrough) return chunk;
    this.buffer = Buffer.concat([this.buffer, chunk]);
    const out: Buffer[] = [];
    if (!this.headDone) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return Buffer.alloc(0);
      this.headDone = true;
      if (!/^HTTP\/1\.[01] 101 /.test(this.buffer.subarray(0, 16).toString('latin1'))) {
        this.passThrough = true;
        const all = this.buffer;
        this.buffer = Buffer.alloc(0);
        return all;
      }
      out.push(this.buffer.subarray(0, end + 4));
      this.buffer = this.buffer.subarray(end + 4);
    }
    for (;;) {
      const frame = parseFrame(this.buffer);
      if (!frame) break;
      this.buffer = this.buffer.subarray(frame.length);
      const { fin, opcode, payload } = frame;
      out.push(
        fin && opcode === 1 ? encodeFrame(0x81, Buffer.from(this.rewrite(payload.toString('utf8')))) : frame.raw,
      );
    }
    return Buffer.concat(out);
  }
}

function parseFrame(
  buffer: Buffer,
): { fin: boolean; opcode: number; payload: Buffer; raw: Buffer; length: number } | undefined {
  if (buffer.length < 2) return undefined;
  const fin = (buffer[0] & 0x80) !== 0;
  const opcode = buffer[0] & 0x0f;
  const masked = (buffer[1] & 0x80) !== 0;
  let length = buffer[1] & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return undefined;
    length = buffer.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return undefined;
    length = Number(buffer.readBigUInt64BE(2));
    offset = 10;
  }
  if (masked) offset += 4;
  if (buffer.length < offset + length) return undefined;
  const raw = buffer.subarray(0, offset + length);
  return { fin, opcode, payload: buffer.subarray(offset, offset + length), raw, length: offset + length };
}

function encodeFrame(first: number, payload: Buffer): Buffer {
  let head: Buffer;
  if (payload.length < 126) head = Buffer.from([first, payload.length]);
  else if (payload.length < 65536) {
    head = Buffer.alloc(4);
    head[0] = first;
    head[1] = 126;
    head.writeUInt16BE(payload.length, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = first;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  return Buffer.concat([head, payload]);
}
