import { createServer, STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { INestApplicationContext } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import type { Logger } from 'pino';
import type { WebSocket, WebSocketServer } from 'ws';
import { AuthFailLimiter, AuthService } from '#core';
import {
  AsmtpError,
  bearerFrom,
  firstParam,
  hashToken,
  isUnavailable,
  parseCursorPair,
  parseQueryString,
  type Agent,
  type Cursor,
} from '#domain';
import { requestIdOf } from '#http';
import { Metrics } from '#metrics';
import { SocketLeases, type SocketLease } from './socket-leases';

export const CONNECT_PATH = '/connect';

/** What the upgrade handler established, handed to the gateway with the request. */
export interface ConnectAuth {
  agent: Agent;
  tokenHash: string;
  cursor?: Cursor;
}

export type ConnectRequest = IncomingMessage & { roost?: ConnectAuth };

/** `roost_ws_handshakes_total{outcome}` of a refused handshake. */
const outcomeOf = (error: AsmtpError): string =>
  error.status === 401 ? 'unauthorized' : error.status === 429 ? 'rate_limited' : 'refused';

/**
 * `@nestjs/platform-ws` with ASMTP's handshake (ASMTP.md §6.1): the bearer (header, else
 * `?token=`) and the resume cursor are checked before the upgrade, and refusals are plain HTTP
 * responses with the JSON error body and `Connection: close`.
 */
export class RoostWsAdapter extends WsAdapter {
  private readonly auth: AuthService;
  private readonly authFail: AuthFailLimiter;
  private readonly leases: SocketLeases;
  private readonly metrics: Metrics;
  private draining = false;

  constructor(
    app: INestApplicationContext,
    private readonly maxClientFrameBytes: number,
    /** The process's JSON logger (libs/http `createLogger`). */
    private readonly log: Logger,
  ) {
    super(app);
    this.auth = app.get(AuthService);
    this.authFail = app.get(AuthFailLimiter);
    this.leases = app.get(SocketLeases);
    this.metrics = app.get(Metrics);
  }

  /** Refuse new upgrades (SIGTERM drain). */
  drain(): void {
    this.draining = true;
  }

  override create(port: number, options: Record<string, unknown> = {}): WebSocketServer {
    const server = super.create(port, {
      ...options,
      maxPayload: this.maxClientFrameBytes,
      perMessageDeflate: false,
    }) as WebSocketServer;
    // A handshake `ws` refuses (bad Sec-WebSocket-Key or -Version, Upgrade header, method) gets the
    // ASMTP error body too, not `ws`'s plain-text one.
    server.on('wsClientError', (error: Error, socket: Duplex, request: IncomingMessage) => {
      this.refuse(
        socket,
        request,
        requestIdOf(request.headers['x-request-id']),
        request.method === 'GET'
          ? new AsmtpError(400, 'BAD_REQUEST', error.message)
          : new AsmtpError(405, 'METHOD_NOT_ALLOWED', error.message),
      );
    });
    return server;
  }

  /** Clients send nothing ASMTP defines; their frames are read and dropped (§6.2). */
  override bindMessageHandlers(): void {}

  protected override ensureHttpServerExists(port: number, httpServer: Server = createServer()): Server | undefined {
    if (this.httpServersRegistry.has(port)) return undefined;
    this.httpServersRegistry.set(port, httpServer);
    httpServer.on('upgrade', (request: ConnectRequest, socket: Duplex, head: Buffer) => {
      socket.on('error', () => undefined);
      void this.upgrade(port, request, socket, head);
    });
    return httpServer;
  }

  private async upgrade(port: number, request: ConnectRequest, socket: Duplex, head: Buffer): Promise<void> {
    const reqId = requestIdOf(request.headers['x-request-id']);
    let lease: SocketLease | undefined;
    try {
      if (this.draining) throw new AsmtpError(503, 'UNAVAILABLE', 'gateway is draining, reconnect elsewhere');
      const url = request.url ?? '';
      if (!URL.canParse(url, 'http://gateway')) throw new AsmtpError(400, 'BAD_REQUEST', 'unparsable request URL');
      // The path exactly, as `ws` compares it (`/./connect` or `/connect#x` is not `/connect`).
      // Reference quirk kept for compatibility: a wrong path is 404 with code BAD_REQUEST.
      const path = url.includes('?') ? url.slice(0, url.indexOf('?')) : url;
      if (path !== CONNECT_PATH)
        throw new AsmtpError(404, 'BAD_REQUEST', `no WebSocket endpoint at ${path.slice(0, 200)}`);
      const pairs = parseQueryString(url.includes('?') ? url.slice(url.indexOf('?') + 1) : '');
      const queryToken = firstParam(pairs, 'token');
      const token = bearerFrom(request.headers.authorization) ?? (queryToken ? queryToken : null);
      const address = this.authFail.addressOf(request.socket.remoteAddress, request.headers['x-forwarded-for']);
      const agent = await this.authFail.guard(address, () => this.auth.agentFor(token));
      const cursor = parseCursorPair(pairs);
      const wsServer = ((this.wsServersRegistry.get(port) as WebSocketServer[] | undefined) ?? []).find(
        (candidate) => (candidate as WebSocketServer & { path?: string }).path === CONNECT_PATH,
      );
      if (!wsServer) throw new AsmtpError(404, 'BAD_REQUEST', 'no WebSocket endpoint');
      // Last, so a refusal for any other reason holds no slot.
      lease = await this.leases.acquire(agent.id);
      if (lease) {
        // The slot lives as long as the TCP connection: an upgrade `ws` refuses, a client gone
        // during the handshake, or the socket's close all free it.
        const held = lease;
        if (socket.destroyed) throw new AsmtpError(400, 'BAD_REQUEST', 'client went away during the handshake');
        socket.once('close', () => this.leases.release(held));
      }
      request.roost = { agent, tokenHash: hashToken(token!), ...(cursor ? { cursor } : {}) };
      wsServer.handleUpgrade(request, socket, head, (ws: WebSocket) => {
        this.metrics.wsHandshakes.inc({ outcome: 'accepted' });
        wsServer.emit('connection', ws, request);
      });
    } catch (error) {
      this.leases.release(lease);
      this.refuse(socket, request, reqId, this.refusalFor(error, reqId));
    }
  }

  /** The answer to a failed upgrade; what is not the client's doing is logged, as on HTTP routes. */
  private refusalFor(error: unknown, reqId: string): AsmtpError {
    if (error instanceof AsmtpError) return error;
    if (isUnavailable(error)) {
      this.log.warn(
        { context: 'gateway', req_id: reqId },
        `dependency unavailable during a WebSocket upgrade: ${(error as Error).message}`,
      );
      return new AsmtpError(503, 'UNAVAILABLE', 'a dependency is unavailable, retry later');
    }
    const stack = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.log.error({ context: 'gateway', req_id: reqId, stack }, 'internal error during a WebSocket upgrade');
    return new AsmtpError(500, 'INTERNAL_ERROR', 'internal error');
  }

  private refuse(socket: Duplex, request: IncomingMessage, reqId: string, error: AsmtpError): void {
    this.metrics.wsHandshakes.inc({ outcome: outcomeOf(error) });
    this.log.debug(
      { context: 'gateway', req_id: reqId },
      `handshake refused: ${error.status} ${error.code} (${error.message}) from ${request.socket.remoteAddress ?? 'unknown'}`,
    );
    refuse(socket, error);
  }
}

function refuse(socket: Duplex, error: AsmtpError): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(error.body());
  // Only headers Roost itself sets (e.g. `retry-after` on 429): no client text reaches them.
  const extra = Object.entries(error.headers ?? {})
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}\r\n` +
      'Connection: close\r\n' +
      extra +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
