import { setTimeout as sleep } from 'node:timers/promises';
import type { Run } from './runner';
import { connect } from './ws';
import { envelope, fakeAwsKey, ORIGIN } from './wire';

/** Statuses by which an operator says "no such route / not implemented". */
const ABSENT = new Set([404, 405, 501]);

async function routeStatus(run: Run, method: string, path: string, body?: unknown): Promise<number> {
  const probe = await run.probe();
  const reply = await run.http.request(method, path, { token: probe.token, body, validate: false });
  return reply.status;
}

function route(run: Run, name: string, method: string, path: string, what: string, body?: unknown) {
  return run.capability(name, async () => {
    const status = await routeStatus(run, method, path, body);
    return ABSENT.has(status) ? `target lacks ${what} (${method} ${path} → ${status})` : null;
  });
}

/** Capabilities ASMTP marks as operator extensions, and Roost's own extensions (EXTENSIONS.md). */
export const caps = {
  files: (run: Run) => route(run, 'files', 'POST', '/files', 'file uploads', 'probe'),
  searchAgents: (run: Run) => route(run, 'search-agents', 'GET', '/search/agents?q=zz', 'agent search'),
  searchMessages: (run: Run) => route(run, 'search-messages', 'GET', '/search/messages?q=zz', 'message search'),
  self: (run: Run) => route(run, 'self', 'GET', '/agents/me', 'the self surface'),
  allowlist: (run: Run) => route(run, 'allowlist', 'GET', '/agents/me/allowlist', 'allowlist editing'),
  blocks: (run: Run) => route(run, 'blocks', 'GET', '/agents/me/blocks', 'blocks'),
  discovery: (run: Run) =>
    run.capability('discovery', async () => {
      const probe = await run.probe();
      const status = await routeStatus(run, 'GET', `/agents/${probe.owner}/${probe.name}`);
      return status === 200
        ? null
        : `target lacks agent discovery (GET /agents/{owner}/{name} of the caller → ${status})`;
    }),
  outFeed: (run: Run) =>
    run.capability('out-feed', async () => {
      const status = await routeStatus(run, 'GET', '/mailbox?direction=out');
      return status === 200 ? null : `target lacks direction=out|both (GET /mailbox?direction=out → ${status})`;
    }),
  schedules: (run: Run) => route(run, 'schedules', 'GET', '/schedules', 'schedules'),
  orgs: (run: Run) =>
    run.capability('orgs', async () => {
      const reply = await run.http.get('/_admin/orgs', run.options.adminToken, { validate: false });
      return ABSENT.has(reply.status) ? `target lacks organizations (GET /_admin/orgs → ${reply.status})` : null;
    }),
  receipts: (run: Run) =>
    run.capability('receipts', async () => {
      const probe = await run.probe();
      const sent = await run.http.post('/messages', envelope(probe.handle), probe.token, { validate: false });
      if (sent.status !== 202) return `could not probe receipts (self-send → ${sent.status})`;
      const status = await routeStatus(run, 'GET', `/messages/${sent.body.id}/receipts`);
      return status === 200 ? null : `target lacks receipts (GET /messages/{id}/receipts → ${status})`;
    }),
  /** EXTENSIONS.md §4: a planted fake AWS key yields `warnings` (or a block) for an agent on defaults. */
  guard: (run: Run) =>
    run.capability('guard', async () => {
      const probe = await run.probe();
      const body = envelope(probe.handle, {
        content_parts: [{ type: 'text', text: `deploy with ${fakeAwsKey()} please` }],
      });
      const reply = await run.http.post('/messages', body, probe.token, { validate: false });
      if (reply.status === 202 && Array.isArray(reply.body?.warnings)) return null;
      if (reply.status === 422 && reply.body?.error?.code === 'CONTENT_BLOCKED') return null;
      return `content guard not active on this target (a planted AWS key id → ${reply.status} without warnings)`;
    }),
  /** EXTENSIONS.md §1: `/connect?after_created_at&after_envelope_id` sends `replay.complete`. */
  resume: (run: Run) =>
    run.capability('resume', async () => {
      const probe = await run.probe();
      let socket;
      try {
        socket = await connect(run.options.url, {
          token: probe.token,
          query: { after_created_at: String(ORIGIN.created_at), after_envelope_id: ORIGIN.envelope_id },
        });
      } catch (error) {
        return `target refused a /connect with resume parameters (${(error as { status?: number }).status ?? (error as Error).message})`;
      }
      try {
        const deadline = Date.now() + run.options.frameTimeoutMs;
        while (Date.now() < deadline) {
          if (socket.frames.some((frame) => frame.op === 'replay.complete')) return null;
          if (socket.closeCode !== undefined) break;
          await sleep(50);
        }
        return 'target does not resume on /connect (no replay.complete after a cursor)';
      } finally {
        socket.terminate();
      }
    }),
};
