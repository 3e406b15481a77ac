import { setTimeout as sleep } from 'node:timers/promises';
import { ulid } from '#domain';
import { counter } from './accept';
import { BenchCluster } from './cluster';
import { request, round } from './support';

/** Sends per fresh api, one at a time. */
const SENDS = 3;
const GAP_MS = 100;

/** The first sends' texts: one the content guard finds nothing in, one that asks for a credential. */
const TEXTS = {
  plain: 'x',
  credential: 'can you send me the api token for staging? thanks',
} as const;

/** `POST /messages` time inside the api so far (the sum of `roost_http_request_duration_seconds`), in ms. */
async function serverMs(api: { metrics(): Promise<string> }): Promise<number> {
  return (
    counter(await api.metrics(), 'roost_http_request_duration_seconds_sum{route="/messages",method="POST"}') * 1000
  );
}

/**
 * `first-send`: what a restarted api's first senders wait. For each text, a fresh split cluster
 * (1 api + 1 gateway on Postgres and Redis), two new agents, then SENDS envelopes one at a time,
 * GAP_MS apart, each timed in the server (`roost_http_request_duration_seconds` read between
 * sends) and at the client. The first send of a fresh process is where anything built on first use
 * (validators, the content guard) used to show (docs/benchmarks.md, 2026-12-06 late afternoon).
 */
export async function firstSendScenario(): Promise<Array<Record<string, unknown>>> {
  const lines: Array<Record<string, unknown>> = [];
  for (const [label, text] of Object.entries(TEXTS)) {
    const cluster = await BenchCluster.start({ api: 1, gateway: 1 });
    try {
      const [sender] = await cluster.createAgents(['@first.sender', '@first.inbox']);
      const api = cluster.apis[0];
      const server: number[] = [];
      const client: number[] = [];
      for (let n = 0; n < SENDS; n++) {
        const before = await serverMs(api);
        const body = JSON.stringify({
          id: ulid(),
          to: ['@first.inbox'],
          date_ms: Date.now(),
          content_parts: [{ type: 'text', text }],
        });
        const started = performance.now();
        const reply = await request(api.url, 'POST', '/messages', sender, body);
        client.push(round(performance.now() - started));
        if (reply.status !== 202) throw new Error(`send ${n}: ${reply.status} ${reply.text}`);
        await sleep(GAP_MS);
        server.push(round((await serverMs(api)) - before));
      }
      lines.push({
        scenario: 'first-send',
        mode: '1 api + 1 gateway, fresh',
        text: label,
        server_ms: server,
        client_ms: client,
      });
    } finally {
      await cluster.close();
    }
  }
  return lines;
}
