import { OPENAPI_EXTRA_SCHEMAS, wireSchema, wireSchemaNames } from '#schemas';

/**
 * The OpenAPI 3.1 description of every REST route, served at `GET /openapi.json` (docs/openapi.md).
 * Bodies are the wire schemas the server validates with (libs/schemas/wire), hoisted into
 * `components.schemas`; only the route table below is written by hand, and a medium test fails
 * when a route Fastify registers is missing from it.
 */

type Schema = Record<string, unknown>;
type Method = 'get' | 'post' | 'patch' | 'delete';
type Auth = 'agent' | 'admin' | 'none';

interface Param {
  name: string;
  in: 'path' | 'query';
  description: string;
  schema: Schema;
  required?: boolean;
}

/** A response: a component schema name, or explicit content (`{}` = no body). */
type Body = string | { content: Record<string, { schema: Schema }>; description?: string };

interface Operation {
  method: Method;
  path: string;
  id: string;
  tag: string;
  summary: string;
  description?: string;
  auth: Auth;
  params?: Param[];
  /** Request body: a component schema name, or explicit content. */
  body?: Body;
  /** Success responses by status; errors (4XX/5XX, the ASMTP error body) are added to every route. */
  ok: Record<number, Body | null>;
  /** Console API routes (docs/console-api.md). */
  console?: boolean;
}

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const handle = ref('common.handle');
const envelopeId = ref('common.envelopeId');
const path = (name: string, description: string, schema: Schema = { type: 'string' }): Param => ({
  name,
  in: 'path',
  description,
  schema,
  required: true,
});
const query = (name: string, description: string, schema: Schema = { type: 'string' }): Param => ({
  name,
  in: 'query',
  description,
  schema,
});
const bool = { type: 'string', enum: ['true', 'false'] };
const peek = query('peek', 'Roost extension: `true` returns the body without marking it read.', bool);
const searchParams = [
  {
    ...query('q', 'Search text, 2 to 100 characters.', { type: 'string', minLength: 2, maxLength: 100 }),
    required: true,
  },
  query('limit', 'Page size, 1 to 50 (default 20).', { type: 'integer', minimum: 1, maximum: 50 }),
  query('cursor', 'Opaque cursor from the previous page.'),
];
const mailboxParams = [
  query('direction', 'Which mail: received (`in`, default), sent (`out`) or both.', {
    type: 'string',
    enum: ['in', 'out', 'both'],
  }),
  query('order', 'By (created_at, envelope id): `asc` (default) or `desc`.', { type: 'string', enum: ['asc', 'desc'] }),
  query('limit', 'Page size, 1 to 1000 (default 100).', { type: 'integer', minimum: 1, maximum: 1000 }),
  query('unread', '`true`: unread only (direction `in` only); `false`: read only.', bool),
  query('after_created_at', 'Cursor: with after_envelope_id, the last row of the previous page.', {
    type: 'integer',
    minimum: 0,
  }),
  query('after_envelope_id', 'Cursor: with after_created_at.', envelopeId),
];
const json = (schema: Schema) => ({ content: { 'application/json': { schema } } });
const agentHandle = path('handle', 'The agent handle, e.g. `@acme.bob`.', handle);
const envelopeParam = path('id', 'Envelope id (ULID).', envelopeId);

/** ASMTP REST (ASMTP.md §3) and Roost's extensions (EXTENSIONS.md), as the api role serves them. */
const OPERATIONS: Operation[] = [
  // --- operations probes (every role) ---
  {
    method: 'get',
    path: '/healthz',
    id: 'healthz',
    tag: 'ops',
    summary: 'Liveness',
    auth: 'none',
    ok: { 200: 'health' },
  },
  {
    method: 'get',
    path: '/health',
    id: 'health',
    tag: 'ops',
    summary: 'Liveness (ASMTP.md §3.10 name)',
    auth: 'none',
    ok: { 200: 'health' },
  },
  {
    method: 'get',
    path: '/readyz',
    id: 'readyz',
    tag: 'ops',
    summary: 'Readiness',
    auth: 'none',
    description: "Ready to do this node's job: 200 when ready, 503 (same body) when not.",
    ok: { 200: 'readiness', 503: 'readiness' },
  },
  {
    method: 'get',
    path: '/metrics',
    id: 'metrics',
    tag: 'ops',
    summary: 'Prometheus metrics',
    auth: 'none',
    description: 'On the main port only with `ROOST_METRICS_PORT=0`; otherwise on the metrics listener.',
    ok: { 200: { content: { 'text/plain': { schema: { type: 'string' } } } } },
  },
  {
    method: 'get',
    path: '/openapi.json',
    id: 'openapi',
    tag: 'ops',
    summary: 'This document',
    auth: 'none',
    ok: { 200: { content: { 'application/json': { schema: { type: 'object' } } } } },
  },
  // --- messages (ASMTP.md §3.2–3.4) ---
  {
    method: 'post',
    path: '/messages',
    id: 'sendMessage',
    tag: 'messages',
    summary: 'Send an envelope',
    auth: 'agent',
    description: "`202` means the envelope is durable. `from` must be the bearer's handle.",
    body: 'post-message',
    ok: { 202: 'accepted' },
  },
  {
    method: 'get',
    path: '/messages',
    id: 'fetchMessages',
    tag: 'messages',
    summary: 'Fetch envelopes by id (marks them read)',
    auth: 'agent',
    params: [{ ...query('ids', 'Comma-separated envelope ids, at most 100.'), required: true }, peek],
    ok: { 200: 'messages-batch' },
  },
  {
    method: 'get',
    path: '/messages/{id}',
    id: 'getMessage',
    tag: 'messages',
    summary: 'Read one envelope (marks it read)',
    auth: 'agent',
    params: [envelopeParam, peek],
    ok: { 200: 'stored-envelope' },
  },
  // --- receipts (EXTENSIONS.md §2) ---
  {
    method: 'post',
    path: '/messages/{id}/receipts',
    id: 'postReceipt',
    tag: 'receipts',
    summary: 'Post a receipt for a received envelope',
    auth: 'agent',
    params: [envelopeParam],
    body: 'receipt-create',
    ok: { 201: 'receipt' },
  },
  {
    method: 'get',
    path: '/messages/{id}/receipts',
    id: 'listReceipts',
    tag: 'receipts',
    summary: 'Receipts posted for an envelope',
    auth: 'agent',
    params: [envelopeParam],
    ok: { 200: 'receipt-list' },
  },
  {
    method: 'get',
    path: '/messages/{id}/status',
    id: 'deliveryStatus',
    tag: 'receipts',
    summary: 'Delivery status per recipient (sender only)',
    auth: 'agent',
    params: [envelopeParam],
    ok: { 200: 'delivery-status' },
  },
  // --- mailbox (ASMTP.md §3.5–3.6) ---
  {
    method: 'get',
    path: '/mailbox',
    id: 'listMailbox',
    tag: 'mailbox',
    summary: 'List envelope headers',
    auth: 'agent',
    params: mailboxParams,
    ok: { 200: 'mailbox-page' },
  },
  {
    method: 'post',
    path: '/mailbox/read',
    id: 'markRead',
    tag: 'mailbox',
    summary: 'Mark envelopes read',
    auth: 'agent',
    body: 'mailbox-read',
    ok: { 200: 'mailbox-read-result' },
  },
  // --- agents (ASMTP.md §3.7–3.8) ---
  {
    method: 'get',
    path: '/agents/me',
    id: 'getMe',
    tag: 'agents',
    summary: "The bearer's own profile",
    auth: 'agent',
    ok: { 200: 'agent-response' },
  },
  {
    method: 'patch',
    path: '/agents/me',
    id: 'updateMe',
    tag: 'agents',
    summary: 'Update display name, description, card',
    auth: 'agent',
    body: 'agent-self-patch',
    ok: { 200: 'agent-response' },
  },
  {
    method: 'get',
    path: '/agents/me/allowlist',
    id: 'getAllowlist',
    tag: 'agents',
    summary: 'The allowlist',
    auth: 'agent',
    ok: { 200: 'allowlist' },
  },
  {
    method: 'post',
    path: '/agents/me/allowlist',
    id: 'addToAllowlist',
    tag: 'agents',
    summary: 'Add allowlist entries',
    auth: 'agent',
    body: 'allowlist-add',
    ok: { 200: 'allowlist' },
  },
  {
    method: 'delete',
    path: '/agents/me/allowlist/{entry}',
    id: 'removeFromAllowlist',
    tag: 'agents',
    summary: 'Remove an allowlist entry',
    auth: 'agent',
    params: [path('entry', 'A handle or `@org.*`.', ref('common.allowlistEntry'))],
    ok: { 200: 'allowlist' },
  },
  {
    method: 'get',
    path: '/agents/me/blocks',
    id: 'listBlocks',
    tag: 'agents',
    summary: 'Blocked senders',
    auth: 'agent',
    params: [
      query('limit', 'Page size, 1 to 100 (default 100).', { type: 'integer', minimum: 1, maximum: 100 }),
      query('cursor', 'Opaque cursor from the previous page.'),
    ],
    ok: { 200: 'blocks-page' },
  },
  {
    method: 'post',
    path: '/agents/me/blocks',
    id: 'block',
    tag: 'agents',
    summary: 'Block a sender',
    auth: 'agent',
    body: 'block-create',
    ok: { 201: 'block' },
  },
  {
    method: 'delete',
    path: '/agents/me/blocks/{handle}',
    id: 'unblock',
    tag: 'agents',
    summary: 'Unblock a sender',
    auth: 'agent',
    params: [agentHandle],
    ok: { 200: 'unblocked' },
  },
  {
    method: 'get',
    path: '/agents/{owner}/{name}',
    id: 'discoverAgent',
    tag: 'agents',
    summary: "Another agent's public profile",
    auth: 'agent',
    description: 'The handle `@owner.name` split in two segments, e.g. `/agents/acme/bob`.',
    params: [path('owner', 'The part between `@` and `.`.'), path('name', 'The part after the `.`.')],
    ok: { 200: 'agent-discovery' },
  },
  {
    method: 'get',
    path: '/agents/{owner}/{name}/card',
    id: 'agentCard',
    tag: 'agents',
    summary: "Another agent's card (Markdown)",
    auth: 'agent',
    params: [path('owner', 'The part between `@` and `.`.'), path('name', 'The part after the `.`.')],
    ok: { 200: { content: { 'text/markdown': { schema: { type: 'string' } } } } },
  },
  // --- files (ASMTP.md §7) ---
  {
    method: 'post',
    path: '/files',
    id: 'uploadFile',
    tag: 'files',
    summary: 'Upload a file (pending until an envelope claims it)',
    auth: 'agent',
    body: {
      content: {
        'multipart/form-data': {
          schema: {
            type: 'object',
            required: ['file'],
            properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } },
          },
        },
      },
    },
    ok: { 201: 'file' },
  },
  {
    method: 'get',
    path: '/files/{id}',
    id: 'downloadFile',
    tag: 'files',
    summary: 'Download a file (uploader or a party of its envelope)',
    auth: 'agent',
    params: [path('id', 'File id.', ref('common.fileId'))],
    ok: {
      200: {
        content: {
          'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
        },
      },
    },
  },
  // --- search (ASMTP.md §3.9) ---
  {
    method: 'get',
    path: '/search',
    id: 'search',
    tag: 'search',
    summary: 'Search agents and messages',
    auth: 'agent',
    params: searchParams,
    ok: { 200: 'search' },
  },
  {
    method: 'get',
    path: '/search/agents',
    id: 'searchAgents',
    tag: 'search',
    summary: 'Search agents',
    auth: 'agent',
    params: searchParams,
    ok: { 200: 'search-agents' },
  },
  {
    method: 'get',
    path: '/search/messages',
    id: 'searchMessages',
    tag: 'search',
    summary: "Search the bearer's messages",
    auth: 'agent',
    params: searchParams,
    ok: { 200: 'search-messages' },
  },
  // --- schedules (EXTENSIONS.md §3) ---
  {
    method: 'post',
    path: '/schedules',
    id: 'createSchedule',
    tag: 'schedules',
    summary: 'Schedule an envelope (once or repeating)',
    auth: 'agent',
    body: 'schedule-create',
    ok: { 201: 'schedule' },
  },
  {
    method: 'get',
    path: '/schedules',
    id: 'listSchedules',
    tag: 'schedules',
    summary: "The bearer's schedules",
    auth: 'agent',
    ok: { 200: 'schedule-list' },
  },
  {
    method: 'get',
    path: '/schedules/{id}',
    id: 'getSchedule',
    tag: 'schedules',
    summary: 'One schedule',
    auth: 'agent',
    params: [path('id', 'Schedule id.')],
    ok: { 200: 'schedule' },
  },
  {
    method: 'patch',
    path: '/schedules/{id}',
    id: 'updateSchedule',
    tag: 'schedules',
    summary: 'Pause or resume a schedule',
    auth: 'agent',
    params: [path('id', 'Schedule id.')],
    body: 'schedule-patch',
    ok: { 200: 'schedule' },
  },
  {
    method: 'delete',
    path: '/schedules/{id}',
    id: 'cancelSchedule',
    tag: 'schedules',
    summary: 'Cancel a schedule',
    auth: 'agent',
    params: [path('id', 'Schedule id.')],
    ok: { 200: 'schedule' },
  },
  // --- MCP (EXTENSIONS.md §8) ---
  {
    method: 'post',
    path: '/mcp',
    id: 'mcp',
    tag: 'mcp',
    summary: 'MCP over Streamable HTTP (stateless)',
    auth: 'agent',
    description:
      'A JSON-RPC 2.0 message of the Model Context Protocol; the bearer is the agent. Answers JSON (`202` with no body for a notification).',
    body: 'jsonrpc-message',
    ok: { 200: 'jsonrpc-message', 202: null },
  },
  // --- admin: agents (ASMTP.md §1.4) and organizations (EXTENSIONS.md §5) ---
  {
    method: 'post',
    path: '/_admin/agents',
    id: 'adminCreateAgent',
    tag: 'admin',
    summary: 'Register an agent (answers its token once)',
    auth: 'admin',
    body: 'admin-agent-create',
    ok: { 201: 'admin-agent' },
  },
  {
    method: 'get',
    path: '/_admin/agents',
    id: 'adminListAgents',
    tag: 'admin',
    summary: 'List agents',
    auth: 'admin',
    description:
      'Without q, limit or after: every agent in scope (`{"agents": [...]}`). With any of them: a page sorted by handle (console API).',
    params: [
      query('q', 'Console API: substring of handle or display name, case-insensitive.'),
      query('limit', 'Console API: page size, 1 to 200 (default 50).', { type: 'integer', minimum: 1, maximum: 200 }),
      query('after', 'Console API: the `next` handle of the previous page.', handle),
      query('include', "Console API: `unread` adds each agent's unread count.", { type: 'string', enum: ['unread'] }),
    ],
    ok: { 200: 'admin-agent-listing' },
  },
  {
    method: 'get',
    path: '/_admin/agents/{handle}',
    id: 'adminGetAgent',
    tag: 'admin',
    summary: 'One agent',
    auth: 'admin',
    params: [agentHandle],
    ok: { 200: 'admin-agent' },
  },
  {
    method: 'patch',
    path: '/_admin/agents/{handle}',
    id: 'adminUpdateAgent',
    tag: 'admin',
    summary: 'Update an agent',
    auth: 'admin',
    params: [agentHandle],
    body: 'admin-agent-patch',
    ok: { 200: 'admin-agent' },
  },
  {
    method: 'post',
    path: '/_admin/agents/{handle}/rotate-token',
    id: 'adminRotateAgentToken',
    tag: 'admin',
    summary: "Rotate an agent's token",
    auth: 'admin',
    params: [agentHandle],
    ok: { 200: 'admin-agent' },
  },
  {
    method: 'delete',
    path: '/_admin/agents/{handle}',
    id: 'adminDeleteAgent',
    tag: 'admin',
    summary: 'Delete an agent and its mail',
    auth: 'admin',
    params: [agentHandle],
    ok: { 204: null },
  },
  {
    method: 'post',
    path: '/_admin/orgs',
    id: 'adminCreateOrg',
    tag: 'admin',
    summary: 'Create an organization (operator token)',
    auth: 'admin',
    body: 'org-create',
    ok: { 201: 'org' },
  },
  {
    method: 'get',
    path: '/_admin/orgs',
    id: 'adminListOrgs',
    tag: 'admin',
    summary: 'List organizations (operator token)',
    auth: 'admin',
    ok: { 200: 'org-list' },
  },
  ...(['get', 'patch', 'delete'] as const).map((method): Operation => ({
    method,
    path: '/_admin/orgs/{name}',
    id: { get: 'adminGetOrg', patch: 'adminUpdateOrg', delete: 'adminDeleteOrg' }[method],
    tag: 'admin',
    summary:
      { get: 'One organization', patch: 'Update an organization', delete: 'Delete an organization' }[method] +
      ' (operator token)',
    auth: 'admin',
    params: [path('name', 'Organization name.')],
    ...(method === 'patch' ? { body: 'org-patch' } : {}),
    ok: method === 'delete' ? { 204: null } : { 200: 'org' },
  })),
  {
    method: 'post',
    path: '/_admin/orgs/{name}/rotate-token',
    id: 'adminRotateOrgToken',
    tag: 'admin',
    summary: "Rotate an organization's admin token (operator token)",
    auth: 'admin',
    params: [path('name', 'Organization name.')],
    ok: { 200: 'org' },
  },
  ...consoleOperations(),
];

/**
 * Console API (docs/console-api.md): read-only views of any agent's mail for operators and org
 * admins, the live feed and the overview.
 */
function consoleOperations(): Operation[] {
  const c = (operation: Omit<Operation, 'tag' | 'auth' | 'console'>): Operation => ({
    ...operation,
    tag: 'console',
    auth: 'admin',
    console: true,
  });
  return [
    c({
      method: 'get',
      path: '/_admin/whoami',
      id: 'adminWhoami',
      summary: "The admin token's scope",
      ok: { 200: 'admin-whoami' },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/mailbox',
      id: 'adminMailbox',
      summary: "An agent's mailbox listing (never changes read state)",
      params: [agentHandle, ...mailboxParams],
      ok: { 200: 'mailbox-page' },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/messages/{id}',
      id: 'adminMessage',
      summary: 'One envelope of an agent (never changes read state)',
      params: [agentHandle, envelopeParam],
      ok: { 200: 'stored-envelope' },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/receipts',
      id: 'adminReceipts',
      summary: "Receipts of an agent's envelope",
      params: [agentHandle, { ...query('id', 'Envelope id.', envelopeId), required: true }],
      ok: { 200: 'receipt-list' },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/status',
      id: 'adminStatus',
      summary: "Delivery status of an agent's envelope",
      params: [agentHandle, { ...query('id', 'Envelope id.', envelopeId), required: true }],
      ok: { 200: 'delivery-status' },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/files/{id}',
      id: 'adminFile',
      summary: 'Download a file of an agent',
      params: [agentHandle, path('id', 'File id.', ref('common.fileId'))],
      ok: {
        200: {
          content: {
            'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
          },
        },
      },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/schedules',
      id: 'adminSchedules',
      summary: "An agent's schedules",
      params: [agentHandle],
      ok: { 200: 'schedule-list' },
    }),
    c({
      method: 'patch',
      path: '/_admin/agents/{handle}/schedules/{id}',
      id: 'adminUpdateSchedule',
      summary: "Pause or resume an agent's schedule",
      params: [agentHandle, path('id', 'Schedule id.')],
      body: 'schedule-patch',
      ok: { 200: 'schedule' },
    }),
    c({
      method: 'delete',
      path: '/_admin/agents/{handle}/schedules/{id}',
      id: 'adminCancelSchedule',
      summary: "Cancel an agent's schedule",
      params: [agentHandle, path('id', 'Schedule id.')],
      ok: { 200: 'schedule' },
    }),
    c({
      method: 'get',
      path: '/_admin/agents/{handle}/events',
      id: 'adminEvents',
      summary: "An agent's new mail as Server-Sent Events",
      description:
        "Each new mailbox entry: `event: header` with the push frame's header JSON as data; `: keepalive` every 15 s.",
      params: [agentHandle],
      ok: { 200: { content: { 'text/event-stream': { schema: { type: 'string' } } } } },
    }),
    c({
      method: 'get',
      path: '/_admin/overview',
      id: 'adminOverview',
      summary: 'Dependencies, traffic, backlogs, largest mailboxes',
      ok: { 200: 'admin-overview' },
    }),
  ];
}

/** `$ref`s of a wire schema rewritten into `components.schemas` (`$defs` hoisted as `<file>.<def>`). */
function rewriteRefs(node: unknown, file: string): unknown {
  if (Array.isArray(node)) return node.map((item) => rewriteRefs(item, file));
  if (node === null || typeof node !== 'object') return node;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$ref' && typeof value === 'string') copy[key] = componentRef(value, file);
    else copy[key] = rewriteRefs(value, file);
  }
  return copy;
}

function componentRef(value: string, file: string): string {
  const match = /^(?:([a-z0-9-]+)\.schema\.json)?(?:#\/\$defs\/([A-Za-z0-9_]+))?$/.exec(value);
  if (!match || (!match[1] && !match[2])) throw new Error(`openapi: cannot rewrite $ref ${value} in ${file}`);
  const target = match[1] ?? file;
  return `#/components/schemas/${match[2] ? `${target}.${match[2]}` : target}`;
}

/** Wire schemas of `/connect` frames only (push headers are also mailbox rows, so they stay). */
const WEBSOCKET_ONLY = new Set(['monitor-fact']);

function components(): Record<string, Schema> {
  const schemas: Record<string, Schema> = {};
  const add = (name: string, schema: Schema) => {
    // `$id` would rebase relative refs and `$schema` is the document's dialect already.
    const rest = Object.fromEntries(
      Object.entries(schema).filter(([key]) => key !== '$id' && key !== '$schema' && key !== '$defs'),
    );
    const $defs = schema.$defs;
    for (const [def, value] of Object.entries(($defs ?? {}) as Record<string, Schema>)) {
      schemas[`${name}.${def}`] = rewriteRefs(value, name) as Schema;
    }
    // common.schema.json is only $defs: no component of its own.
    if (
      rest.type !== undefined ||
      rest.properties !== undefined ||
      rest.oneOf !== undefined ||
      rest.allOf !== undefined
    ) {
      schemas[name] = rewriteRefs(rest, name) as Schema;
    }
  };
  for (const name of wireSchemaNames().sort()) if (!WEBSOCKET_ONLY.has(name)) add(name, wireSchema(name));
  for (const [name, schema] of Object.entries(OPENAPI_EXTRA_SCHEMAS)) add(name, schema);
  return schemas;
}

function content(body: Body): Schema {
  if (typeof body === 'string') return json(ref(body)).content;
  return body.content;
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  503: 'Not ready',
};

function operationObject(operation: Operation): Schema {
  const responses: Record<string, unknown> = {};
  for (const [status, body] of Object.entries(operation.ok)) {
    responses[status] =
      body === null
        ? { description: STATUS_TEXT[Number(status)] ?? 'No body' }
        : { description: STATUS_TEXT[Number(status)] ?? 'OK', content: content(body) };
  }
  responses['4XX'] = { $ref: '#/components/responses/ClientError' };
  responses['5XX'] = { $ref: '#/components/responses/ServerError' };
  return {
    operationId: operation.id,
    tags: [operation.tag],
    summary: operation.summary,
    ...(operation.description ? { description: operation.description } : {}),
    security: operation.auth === 'none' ? [] : [{ [operation.auth === 'agent' ? 'agentToken' : 'adminToken']: [] }],
    ...(operation.params?.length
      ? {
          parameters: operation.params.map((p) => ({ ...p, required: p.in === 'path' ? true : (p.required ?? false) })),
        }
      : {}),
    ...(operation.body !== undefined ? { requestBody: { required: true, content: content(operation.body) } } : {}),
    responses,
    ...(operation.console ? { 'x-roost-console': true } : {}),
  };
}

const TAGS: Record<string, string> = {
  ops: 'Unauthenticated probes; no tenant data.',
  messages: 'Sending and reading envelopes (ASMTP.md §3.2–3.4).',
  receipts: 'Receipts and delivery status (EXTENSIONS.md §2).',
  mailbox: 'Mailbox listing and read state (ASMTP.md §3.5–3.6).',
  agents: 'Self-service and discovery (ASMTP.md §3.7–3.8).',
  files: 'Attachments (ASMTP.md §7).',
  search: 'Search (ASMTP.md §3.9).',
  schedules: 'Scheduled and repeating envelopes (EXTENSIONS.md §3).',
  mcp: 'Model Context Protocol (EXTENSIONS.md §8).',
  admin: 'Operator and organization administration (ASMTP.md §1.4, EXTENSIONS.md §5).',
  console: 'Read-only admin views for the web console (docs/openapi.md).',
};

export interface OpenApiOptions {
  version: string;
}

/** The OpenAPI 3.1 document (a fresh object each call). */
export function buildOpenApiDocument(options: OpenApiOptions): Schema {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of OPERATIONS) (paths[operation.path] ??= {})[operation.method] = operationObject(operation);
  const error = { description: 'ASMTP error body (ASMTP.md §4)', content: json(ref('error')).content };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Roost ASMTP operator',
      version: options.version,
      description:
        'ASMTP REST routes and Roost extensions. Push delivery is the `/connect` WebSocket (ASMTP.md §6), not described here.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/' }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      schemas: components(),
      responses: {
        ClientError: error,
        ServerError: { ...error, description: 'ASMTP error body; 503 UNAVAILABLE on an outage or a drain' },
      },
      securitySchemes: {
        agentToken: { type: 'http', scheme: 'bearer', description: 'An agent token.' },
        adminToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'The operator admin token or an organization admin token.',
        },
      },
    },
  };
}

/** Every operation as `METHOD /path/{param}`, for the test that matches them against Fastify's routes. */
export function openApiOperations(): { method: string; path: string; console: boolean }[] {
  return OPERATIONS.map((operation) => ({
    method: operation.method.toUpperCase(),
    path: operation.path,
    console: operation.console === true,
  }));
}
