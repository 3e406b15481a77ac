import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { AsmtpError } from '#domain';
import { useCurrentAsyncResourceBind } from './async-resource-bind';
import { registerRawBodyParser } from './body';
import { RouteTable } from './routes';

export interface HttpAdapterOptions {
  requestTimeoutMs: number;
}

/**
 * Fastify tuned to ASMTP's routing rules: exact paths (no trailing-slash tolerance), case-
 * sensitive, no automatic HEAD routes, raw bodies read by Roost, long handle segments allowed.
 */
export function createHttpAdapter(options: HttpAdapterOptions): {
  adapter: FastifyAdapter;
  routes: RouteTable;
  drain: HttpDrain;
} {
  useCurrentAsyncResourceBind(); // Fastify binds a callback per request body: the Node 20 bind is slow
  const adapter = new FastifyAdapter({
    routerOptions: {
      ignoreTrailingSlash: false,
      ignoreDuplicateSlashes: false,
      caseSensitive: true,
      maxParamLength: 2048,
    },
    exposeHeadRoutes: false,
    bodyLimit: 64 * 1024 * 1024,
    requestTimeout: options.requestTimeoutMs,
    connectionTimeout: options.requestTimeoutMs,
    keepAliveTimeout: 65_000,
    // Draining answers 503 with the ASMTP error body (refuseWhileClosing below), not Fastify's own.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    logger: false,
    clientErrorHandler: refuseMalformedRequest,
    // Failures Fastify meets before routing (a malformed percent-escape in the path, an
    // over-long path parameter) still answer with the ASMTP error body.
    frameworkErrors: (error: FastifyError, _request: unknown, reply: FastifyReply) => {
      const refusal =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new AsmtpError(414, 'BAD_REQUEST', 'a path segment is too long')
          : error.code === 'FST_ERR_BAD_URL'
            ? new AsmtpError(400, 'BAD_REQUEST', 'the path is not valid percent-encoded UTF-8')
            : new AsmtpError(500, 'INTERNAL_ERROR', 'internal error');
      void reply
        .code(refusal.status)
        .header('content-type', 'application/json; charset=utf-8')
        .send(JSON.stringify(refusal.body()));
    },
  });
  const fastify = adapter.getInstance();
  const server = fastify.server as typeof fastify.server & { connectionsCheckingInterval: number };
  // Slow clients (a body or headers dribbled a byte at a time) must be cut near the timeout:
  // - Fastify sets requestTimeout after creating the server, which leaves Node's headersTimeout at
  //   60 s; with headersTimeout above requestTimeout Node never times out a slow body at all;
  // - Node checks both only when it sweeps its connections, every 30 s by default (read at listen).
  server.headersTimeout = Math.min(60_000, options.requestTimeoutMs);
  server.connectionsCheckingInterval = Math.min(1_000, Math.max(100, Math.floor(options.requestTimeoutMs / 4)));
  // An Expect header other than 100-continue: Node would answer a bare 417 without a body.
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    const body = JSON.stringify(new AsmtpError(417, 'BAD_REQUEST', 'unsupported Expect header').body());
    response.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      connection: 'close',
    });
    response.end(body);
  });
  const drain = refuseWhileDraining(fastify);
  const routes = new RouteTable();
  routes.attach(fastify);
  registerRawBodyParser(fastify);
  return { adapter, routes, drain };
}

/** The HTTP side of a SIGTERM drain. */
export interface HttpDrain {
  /**
   * From now on every new request is refused `503` + `Connection: close`; in-flight ones finish.
   * `holdOpenMs`: keep listening (and refusing) at least this long, so that clients still sending
   * here learn from a 503 and go elsewhere before the listener closes (see DRAIN_HOLD_OPEN_MS).
   */
  begin(holdOpenMs?: number): void;
  /**
   * Resolves once every request that arrived before begin() has been answered (or abandoned) and
   * the listener is closed with no connection left (see quiesce below).
   */
  settled(): Promise<void>;
}

/**
 * After the last earlier request: how long a fresh connection (no request yet) may send one (it
 * gets the 503 + `Connection: close`) before it is closed. Node's own close destroyed them at
 * once, with their request already on its way: that request was reset.
 */
const QUIESCE_MS = 500;

/**
 * How long a SIGTERM drain keeps the listener open (refusing with 503) even when nothing was in
 * flight. Closing a listening socket resets the connections the kernel has accepted but Node has
 * not yet taken (a client's fresh connection, its request already written: ECONNRESET, not a clean
 * refusal); a drain that settled within a few ms closed it while clients that had not yet met a 503
 * were still connecting (test/e2e/drain-load.test.ts, 1 run in 8). After this window they have.
 */
export const DRAIN_HOLD_OPEN_MS = 500;

/**
 * A drain (SIGTERM) keeps the listener open while requests that arrived earlier finish: a request
 * that arrives meanwhile, on a kept-alive connection or a new one, gets `503 UNAVAILABLE` with the
 * ASMTP error body and `Connection: close`, so the client retries on another node instead of
 * meeting a reset; every answer sent during the drain closes its connection. Once the last earlier
 * request is answered, `settled()` resolves and the process closes the server and exits. Closing
 * the server (Fastify's preClose, e.g. `app.close()` in tests) starts the drain too. Then the
 * listener stops, idle kept-alive connections close, and fresh ones get QUIESCE_MS to send their
 * request (a connection being answered closes by itself after its answer). Fastify's own
 * `return503OnClosing` answered `{"error":"Service Unavailable",...}`, not an ASMTP error. The
 * refusal is a preParsing hook, so the request id and the access log still cover it.
 */
function refuseWhileDraining(fastify: FastifyInstance): HttpDrain {
  let draining = false;
  let inFlight = 0;
  let onSettled: (() => void) | undefined;
  const answered = new Promise<void>((resolve) => (onSettled = resolve));
  const check = () => {
    if (draining && inFlight === 0) onSettled?.();
  };
  const listeners = new Set<() => void>();
  drainListeners.set(fastify.server, listeners);
  // Every open connection, with its requests not yet answered (a connection is idle at 0), and
  // those that have had a request (kept alive since) apart from fresh ones.
  const server = fastify.server;
  const connections = new Map<Socket, number>();
  const used = new WeakSet<Socket>();
  server.on('connection', (socket: Socket) => {
    connections.set(socket, 0);
    socket.once('close', () => connections.delete(socket));
  });
  let openUntil = 0;
  const settled = answered.then(async () => {
    const wait = openUntil - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    await quiesce(server, connections, used);
  });
  const begin = (holdOpenMs = 0) => {
    if (!draining) {
      openUntil = Date.now() + holdOpenMs;
      for (const listener of [...listeners]) listener();
    }
    draining = true;
    check();
  };
  /** Requests that arrived before the drain began: they finish, whatever comes after. */
  const earlier = new WeakSet<object>();
  fastify.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket;
    used.add(socket);
    const counted = connections.has(socket);
    if (counted) connections.set(socket, connections.get(socket)! + 1);
    const before = !draining;
    if (before) {
      earlier.add(request);
      inFlight++;
    }
    // 'close' fires once the answer is sent, and also when the client went away first. One
    // listener for both counts: this runs for every request.
    reply.raw.once('close', () => {
      if (counted && connections.has(socket)) connections.set(socket, connections.get(socket)! - 1);
      if (before) {
        inFlight--;
        check();
      }
    });
    done();
  });
  fastify.addHook('preClose', (done) => {
    begin();
    done();
  });
  fastify.addHook('preParsing', (request, reply, payload, done) => {
    if (!draining || earlier.has(request)) return done(null, payload);
    const refusal = new AsmtpError(503, 'UNAVAILABLE', 'the server is shutting down, retry');
    void reply
      .code(503)
      .header('connection', 'close')
      .header('content-type', 'application/json; charset=utf-8')
      .send(JSON.stringify(refusal.body()));
  });
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });
  return { begin, settled: () => settled };
}

/** Per HTTP server (child Fastify contexts share it): what ends a long-lived response (an SSE feed) when a drain begins. */
const drainListeners = new WeakMap<object, Set<() => void>>();

/**
 * Call `listener` once when the drain of `server` (the Fastify instance serving the request)
 * begins; a response that never ends on its own would otherwise hold the drain until its timeout.
 * Returns the unregistration.
 */
export function onDrain(server: FastifyInstance, listener: () => void): () => void {
  const listeners = drainListeners.get(server.server);
  listeners?.add(listener);
  return () => listeners?.delete(listener);
}

/**
 * Stop listening (net.Server's close: http.Server's would also destroy every idle connection at
 * once). Idle kept-alive connections close now, as Node does; a fresh connection (its request may
 * be on its way) gets QUIESCE_MS to send it, then the idle ones close.
 */
async function quiesce(server: Server, connections: Map<Socket, number>, used: WeakSet<Socket>): Promise<void> {
  if (server.listening) NetServer.prototype.close.call(server);
  // An upgraded connection (a WebSocket: Node has freed its HTTP parser) is not HTTP's to close:
  // the gateway closes it with 1012 so the client reconnects elsewhere.
  for (const socket of connections.keys())
    if ((socket as Socket & { parser?: unknown }).parser === null) connections.delete(socket);
  const closeIdle = (all: boolean) => {
    for (const [socket, pending] of connections) if (pending === 0 && (all || used.has(socket))) socket.destroy();
  };
  closeIdle(false);
  const deadline = Date.now() + QUIESCE_MS;
  while (connections.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  closeIdle(true);
}

/**
 * Requests Node's HTTP parser refuses before Fastify routes them (a malformed request line or
 * header, headers over the size limit, a request past ROOST_HTTP_REQUEST_TIMEOUT_MS) answer with
 * the ASMTP error body too, not Fastify's `{"error":"Bad Request","statusCode":400}`; then the
 * socket is closed, as Node and Fastify do by default.
 */
function refuseMalformedRequest(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const refusal =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new AsmtpError(408, 'BAD_REQUEST', 'the request was not received in time')
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? new AsmtpError(431, 'BAD_REQUEST', 'the request line and headers are too large')
        : new AsmtpError(400, 'BAD_REQUEST', 'malformed HTTP request');
  if (socket.writable) {
    const body = JSON.stringify(refusal.body());
    socket.write(
      `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}\r\n` +
        'Connection: close\r\n' +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
