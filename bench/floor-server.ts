import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import pg from 'pg';

/**
 * `accept-floor`'s server: the least a Node HTTP service can spend per envelope on this machine. A
 * bare `node:http` server on keep-alive connections that reads each POST's body, parses its JSON
 * and answers 202 with a small JSON (about the size of Roost's `Accepted`). No framework,
 * authentication, validation, guard, metrics, log or fan-out.
 *
 * With `FLOOR_DATABASE_URL` it also writes what the accept ceilings write, one ~1 KB envelope row
 * and one mailbox row per request, and answers only after the commit: the requests that arrive in
 * one turn of the event loop go as one statement (one implicit transaction, `synchronous_commit`
 * as the server has it), up to `FLOOR_BATCHES` statements in flight at once. Without it, it answers
 * at once (HTTP alone).
 *
 * Any other method answers 200 at once: what the bench's start-up probe (`GET /healthz`) asks.
 * `bench/accept-floor.ts` runs it as `node dist/bench/floor-server.js` on `PORT` (its own process,
 * measured apart), started like an operator (`startOperatorProcess`).
 */

const INSERT = `WITH e AS (
  INSERT INTO floor_envelopes (id, body) SELECT * FROM unnest($1::text[], $2::text[]) RETURNING id
)
INSERT INTO floor_mailbox (mailbox, envelope_id) SELECT 1, id FROM e`;

interface Pending {
  id: string;
  body: string;
  response: ServerResponse;
}

export interface FloorServerOptions {
  /** Write each request's two rows there before answering; without it, answer at once. */
  databaseUrl?: string;
  /** Statements in flight at once (pool size); default 4. */
  maxInFlight?: number;
  /** 0 (default): any free port. */
  port?: number;
}

export interface FloorServer {
  port: number;
  close(): Promise<void>;
}

function answer(response: ServerResponse, status: number, json: string): void {
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
  });
  response.end(json);
}

const accepted = (id: string) =>
  JSON.stringify({ id, received_ms: Date.now(), recipients: [{ handle: '@bench.inbox' }] });

export async function startFloorServer(options: FloorServerOptions = {}): Promise<FloorServer> {
  const maxInFlight = Math.max(1, options.maxInFlight ?? 4);
  const pool = options.databaseUrl
    ? new pg.Pool({ connectionString: options.databaseUrl, max: maxInFlight })
    : undefined;
  pool?.on('error', () => undefined);
  let queued: Pending[] = [];
  let scheduled = false;
  let inFlight = 0;

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };
  function flush(): void {
    scheduled = false;
    if (queued.length === 0 || inFlight >= maxInFlight) return;
    const batch = queued;
    queued = [];
    inFlight++;
    pool!
      .query(INSERT, [batch.map((p) => p.id), batch.map((p) => p.body)])
      .then(
        () => batch.forEach((p) => answer(p.response, 202, accepted(p.id))),
        () => batch.forEach((p) => answer(p.response, 503, '{"error":{"code":"UNAVAILABLE"}}')),
      )
      .finally(() => {
        inFlight--;
        if (queued.length > 0) schedule();
      });
  }

  const server = createServer({ keepAlive: true }, (request, response) => {
    if (request.method !== 'POST') {
      request.resume();
      return answer(response, 200, '{"status":"ok"}');
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let id: string;
      try {
        const parsed = JSON.parse(text) as { id?: unknown };
        id = typeof parsed.id === 'string' ? parsed.id : randomUUID();
      } catch {
        return answer(response, 400, '{"error":{"code":"INVALID_JSON"}}');
      }
      if (!pool) return answer(response, 202, accepted(id));
      queued.push({ id, body: text, response });
      schedule();
    });
  });

  if (pool) {
    await pool.query('CREATE TABLE IF NOT EXISTS floor_envelopes (id text PRIMARY KEY, body text NOT NULL)');
    await pool.query(
      'CREATE TABLE IF NOT EXISTS floor_mailbox (mailbox bigint NOT NULL, seq bigserial, envelope_id text NOT NULL, PRIMARY KEY (mailbox, seq))',
    );
    // Every connection open before the load, so the backends are all there to be measured.
    const clients = await Promise.all(Array.from({ length: maxInFlight }, () => pool.connect()));
    clients.forEach((client) => client.release());
  }
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await pool?.end();
    },
  };
}

if (require.main === module) {
  void startFloorServer({
    databaseUrl: process.env.FLOOR_DATABASE_URL || undefined,
    maxInFlight: Number(process.env.FLOOR_BATCHES ?? 4),
    port: Number(process.env.PORT ?? 0),
  }).then((floor) => process.once('SIGTERM', () => void floor.close().finally(() => process.exit(0))));
}
