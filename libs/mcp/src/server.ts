import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type {
  JsonSchemaType,
  JsonSchemaValidator,
  jsonSchemaValidator,
} from '@modelcontextprotocol/sdk/validation/types.js';
import * as z from 'zod/v4';
import {
  RECEIPT_STATUSES,
  renderEnvelope,
  shortId,
  triageLine,
  type ContentPart,
  type Cursor,
  type Draft,
  type Header,
  type ReceiptStatus,
  type RoostClient,
} from '#client';
import { toolError, ToolRefusal } from './errors';
import { resolveId } from './ids';
import type { MailWatch } from './watch';

export const MCP_SERVER_NAME = 'roost';
export const MCP_SERVER_VERSION = '0.1.0';

export interface RoostToolsOptions {
  /** The acting agent's client: every tool goes through the wire. */
  client: RoostClient;
  /** The acting agent's handle (reply addressing). */
  agent: string;
  /** What `wait_for_mail` blocks on. */
  watch: MailWatch;
  /** Longest `wait_for_mail` (the HTTP transport keeps it under the request timeout). */
  maxWaitMs: number;
  now?: () => number;
}

const DEFAULT_WAIT_MS = 60_000;

// Short descriptions: the whole tool list is paid at every session start (≤ 1,200 tokens, bench `mcp`).
const handle = z.string();
const handles = z.array(handle).describe('handles, @owner.name');
const ids = z.array(z.string()).min(1).max(100);
const text = z.string().optional();
const data = z.record(z.string(), z.unknown()).optional().describe('JSON object part');
const cursor = {
  after_created_at: z.number().int().min(0).optional(),
  after_envelope_id: z.string().optional(),
};

/**
 * The SDK's JSON Schema validator (ajv), built on first use. A server uses it only for what a
 * client answers to an elicitation, which these tools never ask for; building ajv (its meta-schemas
 * and formats) was ~15 ms of every server's start (`roost mcp` before `initialize`, each `/mcp` session).
 */
export class LazyJsonSchemaValidator implements jsonSchemaValidator {
  private ajv: AjvJsonSchemaValidator | undefined;

  get built(): boolean {
    return this.ajv !== undefined;
  }

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    this.ajv ??= new AjvJsonSchemaValidator();
    return this.ajv.getValidator<T>(schema);
  }
}

/** One per process, like the tool list. */
export const jsonSchemaValidatorOnDemand = new LazyJsonSchemaValidator();

/** Every Roost tool on one MCP server: `roost mcp` (stdio) and `/mcp` (Streamable HTTP) both build theirs here. */
export function createRoostMcpServer(options: RoostToolsOptions): McpServer {
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: MCP_SERVER_VERSION },
    { jsonSchemaValidator: jsonSchemaValidatorOnDemand },
  );
  const { client } = options;
  const now = options.now ?? Date.now;

  const definitions: Array<{ name: string; description: string; shape: z.ZodRawShape }> = [];
  const tool = <Shape extends z.ZodRawShape>(
    name: string,
    description: string,
    inputSchema: Shape,
    run: (args: z.infer<z.ZodObject<Shape>>, signal: AbortSignal) => Promise<CallToolResult>,
  ) => {
    definitions.push({ name, description, shape: inputSchema });
    server.registerTool(name, { description, inputSchema }, (async (
      args: z.infer<z.ZodObject<Shape>>,
      extra: { signal: AbortSignal },
    ) => {
      try {
        return await run(args, extra.signal);
      } catch (error) {
        return toolError(error);
      }
    }) as never);
  };

  tool(
    'send',
    'Send an envelope (text and/or data).',
    {
      to: handles.min(1),
      cc: handles.optional(),
      subject: z.string().optional(),
      text,
      data,
      in_reply_to: z.string().optional(),
      id: z.string().optional().describe('ULID; retry with it to stay idempotent'),
      allow_warnings: z.array(z.string()).optional().describe('content guard codes to accept'),
    },
    async (args) => {
      const inReplyTo = args.in_reply_to === undefined ? undefined : await resolveId(client, args.in_reply_to);
      const draft: Draft = {
        to: args.to,
        content_parts: parts(args.text, args.data),
        ...(args.cc?.length ? { cc: args.cc } : {}),
        ...(args.subject !== undefined ? { subject: args.subject } : {}),
        ...(inReplyTo ? { in_reply_to: inReplyTo } : {}),
        ...(args.id ? { id: args.id } : {}),
        ...(args.allow_warnings?.length ? { allow_warnings: args.allow_warnings as Draft['allow_warnings'] } : {}),
      };
      return sent(await client.send(draft));
    },
  );

  tool(
    'reply',
    "Reply to an envelope's sender (all: every recipient too).",
    { in_reply_to: z.string(), text, data, all: z.boolean().optional() },
    async (args) => {
      const original = await client.message(await resolveId(client, args.in_reply_to), { peek: true });
      const me = options.agent;
      const to = original.from === me ? original.to : [original.from];
      const cc = args.all
        ? [...new Set([...original.to, ...(original.cc ?? [])])].filter((h) => h !== me && !to.includes(h))
        : [];
      const subject =
        original.subject === undefined
          ? undefined
          : /^re:/i.test(original.subject)
            ? original.subject
            : `Re: ${original.subject}`;
      return sent(
        await client.send({
          to,
          ...(cc.length ? { cc } : {}),
          ...(subject !== undefined ? { subject } : {}),
          in_reply_to: original.id,
          references: [...(original.references ?? []), original.id],
          content_parts: parts(args.text, args.data),
        }),
      );
    },
  );

  tool(
    'inbox',
    'Mailbox headers as triage lines (id age from subject type size markers), oldest first.',
    {
      unread: z.boolean().optional().describe('default true; false: read ones too'),
      direction: z.enum(['in', 'out', 'both']).optional(),
      limit: z.number().int().min(1).max(200).optional(),
      ...cursor,
    },
    async (args) => {
      const direction = args.direction ?? 'in';
      const unread = args.unread === false || direction !== 'in' ? undefined : true;
      const page = await client.mailbox({
        direction,
        order: 'asc',
        limit: args.limit ?? 50,
        unread,
        after: cursorOf(args),
      });
      const headers = page.envelope_headers;
      const label = unread ? 'unread' : 'headers';
      const lines =
        headers.length === 0
          ? [`no ${unread ? 'unread mail' : 'headers'}`]
          : [`${headers.length}${page.next_cursor ? '+' : ''} ${label}:`, ...headers.map((h) => triageLine(h, now()))];
      if (page.next_cursor) lines.push(more(page.next_cursor));
      return result(lines.join('\n'), { envelope_headers: headers, next_cursor: page.next_cursor });
    },
  );

  tool(
    'read',
    'Envelope bodies by id or short id; marks them read unless peek.',
    { ids: ids.max(20), peek: z.boolean().optional() },
    async (args) => {
      const full: string[] = [];
      for (const id of args.ids) full.push(await resolveId(client, id));
      const envelopes = await client.messages(full, { peek: args.peek === true });
      const missing = full.filter((id) => !envelopes.some((e) => e.id === id));
      const body = envelopes.map(renderEnvelope).join('\n---\n');
      const text = missing.length ? `${body}${body ? '\n---\n' : ''}not found: ${missing.join(', ')}` : body;
      return result(text, { envelopes, missing });
    },
  );

  tool('mark_read', 'Mark envelopes read.', { ids }, async (args) => {
    const full: string[] = [];
    for (const id of args.ids) full.push(await resolveId(client, id));
    const read = await client.markRead(full);
    return result(`marked ${read.length} read`, { read });
  });

  tool(
    'receipt',
    'Answer an envelope with a receipt.',
    {
      envelope_id: z.string(),
      status: z.enum(RECEIPT_STATUSES as [ReceiptStatus, ...ReceiptStatus[]]),
      note: z.string().max(2000).optional(),
    },
    async (args) => {
      const envelopeId = await resolveId(client, args.envelope_id);
      const posted = await client.postReceipt(envelopeId, {
        status: args.status,
        ...(args.note ? { note: args.note } : {}),
      });
      return result(`receipt ${posted.status} for ${shortId(envelopeId)} (${posted.id})`, posted);
    },
  );

  tool('status', 'Delivery status and receipts of an envelope you sent.', { envelope_id: z.string() }, async (args) => {
    const envelopeId = await resolveId(client, args.envelope_id);
    const [delivery, receipts] = await Promise.all([client.status(envelopeId), client.receipts(envelopeId)]);
    const lines = [
      ...delivery.recipients.map((r) => `${r.handle} ${r.read ? 'read' : 'unread'} ${r.status ?? '-'}`),
      ...receipts.map((r) => `receipt ${r.from} ${r.status}${r.note ? `: ${r.note}` : ''}`),
    ];
    return result(lines.join('\n'), { ...delivery, receipts });
  });

  tool(
    'search',
    'Full-text search of mail you sent or received.',
    { q: z.string().min(2).max(100), limit: z.number().int().min(1).max(50).optional() },
    async (args) => {
      const hits = await client.searchMessages(args.q, args.limit);
      const lines = hits.map((h) => `${shortId(h.envelope_id)} ${h.sender_handle} ${JSON.stringify(h.subject ?? '')}`);
      return result(hits.length ? lines.join('\n') : 'no match', { envelopes: hits });
    },
  );

  tool(
    'agents',
    'Find agents by q, or show one by handle.',
    { q: z.string().min(2).max(100).optional(), handle: handle.optional() },
    async (args) => {
      if (args.handle !== undefined) {
        const found = await client.agent(args.handle);
        const a = found.agent;
        return result(
          `${a.canonical_handle} "${a.display_name}" ${a.inbound_policy}${a.description ? `\n${a.description}` : ''}`,
          found,
        );
      }
      if (args.q === undefined) throw new ToolRefusal('INVALID_QUERY', 'give q or handle');
      const page = await client.searchAgents(args.q);
      const lines = page.agents.map((a) => `${a.canonical_handle} "${a.display_name}"`);
      return result(lines.length ? lines.join('\n') : 'no match', page);
    },
  );

  tool(
    'schedule',
    'Create, list or cancel scheduled sends (times in epoch ms).',
    {
      action: z.enum(['create', 'list', 'cancel']),
      id: z.string().optional().describe('cancel: schedule id'),
      to: z.array(handle).optional(),
      subject: z.string().optional(),
      text,
      data,
      start_at: z.number().int().optional(),
      interval_ms: z.number().int().optional(),
      max_count: z.number().int().optional(),
      end_at: z.number().int().optional(),
    },
    async (args) => {
      if (args.action === 'list') {
        const schedules = await client.schedules();
        const lines = schedules.map(
          (s) =>
            `${s.id} ${s.status} ${s.envelope.to.join(',')}${s.next_run_at && s.status === 'active' ? ` next=${new Date(s.next_run_at).toISOString()}` : ''}`,
        );
        return result(lines.length ? lines.join('\n') : 'no schedules', { schedules });
      }
      if (args.action === 'cancel') {
        if (!args.id) throw new ToolRefusal('INVALID_SCHEDULE', 'cancel needs id');
        const cancelled = await client.cancelSchedule(args.id);
        return result(`cancelled ${cancelled.id}`, cancelled);
      }
      if (!args.to?.length) throw new ToolRefusal('INVALID_SCHEDULE', 'create needs to');
      const created = await client.createSchedule({
        envelope: {
          to: args.to,
          content_parts: parts(args.text, args.data),
          ...(args.subject !== undefined ? { subject: args.subject } : {}),
        },
        ...(args.start_at !== undefined ? { start_at: args.start_at } : {}),
        ...(args.interval_ms !== undefined ? { interval_ms: args.interval_ms } : {}),
        ...(args.max_count !== undefined ? { max_count: args.max_count } : {}),
        ...(args.end_at !== undefined ? { end_at: args.end_at } : {}),
      });
      return result(
        `schedule ${created.id} ${created.status}${created.next_run_at ? ` next=${new Date(created.next_run_at).toISOString()}` : ''}`,
        created,
      );
    },
  );

  tool(
    'wait_for_mail',
    'Block until mail arrives after the cursor (default: now), up to timeout_ms.',
    { timeout_ms: z.number().int().min(0).optional(), ...cursor },
    async (args, signal) => {
      const timeoutMs = Math.min(args.timeout_ms ?? DEFAULT_WAIT_MS, options.maxWaitMs);
      const deadline = now() + timeoutMs;
      let after = cursorOf(args);
      if (after === null) {
        // Default: mail arriving from now on, so the newest header already there is the cursor.
        const newest = await client.mailbox({ direction: 'in', order: 'desc', limit: 1 });
        const head = newest.envelope_headers[0];
        after = head ? { created_at: head.created_at, envelope_id: head.id } : null;
      }
      for (;;) {
        const left = deadline - now();
        if (left <= 0 || !(await options.watch.wait(after, left, signal))) {
          return result('no new mail', { envelope_headers: [], next_cursor: after });
        }
        const page = await client.mailbox({ direction: 'in', order: 'asc', limit: 50, after });
        const headers: Header[] = page.envelope_headers;
        if (headers.length > 0) {
          const last = headers[headers.length - 1];
          const next = { created_at: last.created_at, envelope_id: last.id };
          const lines = [
            `${headers.length}${page.next_cursor ? '+' : ''} new:`,
            ...headers.map((h) => triageLine(h, now())),
            more(next),
          ];
          return result(lines.join('\n'), { envelope_headers: headers, next_cursor: next });
        }
      }
    },
  );

  // The SDK lists each tool with a `$schema` URL, `execution` defaults and safe-integer bounds:
  // ~20 % of the list's tokens and no information. The same schemas, compact (the SDK still
  // validates every call against the zod shapes above). Built at the first `tools/list`, not before
  // `initialize` is answered.
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: (listing ??= definitions.map(({ name, description, shape }) => ({
      name,
      description,
      inputSchema: compactSchema(
        z.toJSONSchema(z.object(shape), { target: 'draft-7', io: 'input' }),
      ) as Tool['inputSchema'],
    }))),
  }));
  return server;
}

/** The tool list is the same for every server: computed once per process, when first asked for. */
let listing: Tool[] | undefined;

const SAFE_BOUND = Number.MAX_SAFE_INTEGER;

function compactSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(compactSchema);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$schema') continue;
    if ((key === 'minimum' && value === -SAFE_BOUND) || (key === 'maximum' && value === SAFE_BOUND)) continue;
    if (key === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') continue;
    if (key === 'additionalProperties' && JSON.stringify(value) === '{}') continue;
    out[key] = compactSchema(value);
  }
  return out;
}

function parts(text: string | undefined, data: Record<string, unknown> | undefined): ContentPart[] {
  const out: ContentPart[] = [];
  if (text !== undefined && text !== '') out.push({ type: 'text', text });
  if (data !== undefined) out.push({ type: 'data', data });
  if (out.length === 0) throw new ToolRefusal('INVALID_CONTENT', 'nothing to send', 'give text, data or both');
  return out;
}

function cursorOf(args: { after_created_at?: number; after_envelope_id?: string }): Cursor | null {
  if (args.after_created_at === undefined && args.after_envelope_id === undefined) return null;
  if (args.after_created_at === undefined || args.after_envelope_id === undefined) {
    throw new ToolRefusal(
      'INVALID_QUERY',
      'after_created_at and after_envelope_id go together',
      'pass both from next_cursor',
    );
  }
  return { created_at: args.after_created_at, envelope_id: args.after_envelope_id };
}

const more = (c: Cursor) => `next: after_created_at=${c.created_at} after_envelope_id=${c.envelope_id}`;

function sent(accepted: { id: string; recipients: Array<{ handle: string }>; warnings?: unknown[] }): CallToolResult {
  const warn = accepted.warnings?.length ? `\nwarning: content guard flagged ${JSON.stringify(accepted.warnings)}` : '';
  return result(
    `sent ${accepted.id} (${shortId(accepted.id)}) to ${accepted.recipients.map((r) => r.handle).join(', ')}${warn}`,
    accepted,
  );
}

function result(text: string, structured: object): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured as Record<string, unknown> };
}
