/**
 * Response and request shapes the OpenAPI document needs that no wire schema describes (the
 * server does not validate them: probes, the MCP envelope, the console's admin routes). JSON
 * Schema 2020-12, `$ref`s in the wire schemas' file form (`admin-agent.schema.json`), which the
 * document builder rewrites like the wire schemas' own.
 */
type Schema = Record<string, unknown>;

/** `GET /readyz` (200 ready, 503 not ready). */
export const readinessSchema: Schema = {
  title: 'GET /readyz response',
  type: 'object',
  required: ['ok', 'checks'],
  additionalProperties: false,
  properties: {
    ok: { type: 'boolean' },
    checks: {
      type: 'object',
      required: ['postgres', 'redis'],
      additionalProperties: false,
      properties: {
        postgres: { type: 'boolean' },
        redis: { oneOf: [{ type: 'boolean' }, { const: 'embedded' }] },
      },
    },
  },
};

/** A JSON-RPC 2.0 message (request, notification or response) carried by `POST /mcp`. */
export const jsonRpcMessageSchema: Schema = {
  title: 'JSON-RPC 2.0 message (MCP Streamable HTTP)',
  type: 'object',
  required: ['jsonrpc'],
  properties: {
    jsonrpc: { const: '2.0' },
    id: { type: ['string', 'integer'] },
    method: { type: 'string' },
    params: { type: 'object' },
    result: { type: 'object' },
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'integer' }, message: { type: 'string' }, data: true },
    },
  },
};

/** `GET /_admin/whoami` (console API). */
export const adminWhoamiSchema: Schema = {
  title: 'GET /_admin/whoami response',
  oneOf: [
    {
      type: 'object',
      required: ['scope'],
      additionalProperties: false,
      properties: { scope: { const: 'operator' } },
    },
    {
      type: 'object',
      required: ['scope', 'org'],
      additionalProperties: false,
      properties: { scope: { const: 'org' }, org: { type: 'string' } },
    },
  ],
};

/** `GET /_admin/agents?q=&limit=&after=` (console API): a keyset page by handle. */
export const adminAgentPageSchema: Schema = {
  title: 'GET /_admin/agents page (with q, limit or after)',
  type: 'object',
  required: ['agents', 'next'],
  additionalProperties: false,
  properties: {
    agents: {
      type: 'array',
      items: {
        allOf: [{ $ref: 'admin-agent.schema.json' }],
        properties: { unread: { type: 'integer', minimum: 0 } },
      },
    },
    next: { oneOf: [{ type: 'null' }, { $ref: 'common.schema.json#/$defs/handle' }] },
  },
};

/** `GET /_admin/overview` (console API); `dependencies` and `backlogs` are null for org tokens. */
export const adminOverviewSchema: Schema = {
  title: 'GET /_admin/overview response',
  type: 'object',
  required: ['dependencies', 'traffic', 'backlogs', 'largest_mailboxes'],
  properties: {
    dependencies: {
      oneOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['postgres', 'redis'],
          properties: { postgres: { type: 'boolean' }, redis: { type: 'boolean' } },
        },
      ],
    },
    traffic: {
      type: 'array',
      items: {
        type: 'object',
        required: ['minute', 'envelopes'],
        properties: { minute: { type: 'string' }, envelopes: { type: 'integer', minimum: 0 } },
      },
    },
    backlogs: {
      oneOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['streams', 'queues'],
          properties: {
            streams: {
              type: 'array',
              items: {
                type: 'object',
                required: ['partition', 'length', 'lag'],
                properties: {
                  partition: { type: 'integer' },
                  length: { type: 'integer' },
                  lag: { type: 'integer' },
                },
              },
            },
            queues: {
              type: 'array',
              items: {
                type: 'object',
                required: ['queue', 'waiting', 'delayed', 'failed'],
                properties: {
                  queue: { type: 'string' },
                  waiting: { type: 'integer' },
                  delayed: { type: 'integer' },
                  failed: { type: 'integer' },
                },
              },
            },
          },
        },
      ],
    },
    largest_mailboxes: {
      type: 'array',
      items: {
        type: 'object',
        required: ['handle', 'unread'],
        properties: { handle: { $ref: 'common.schema.json#/$defs/handle' }, unread: { type: 'integer', minimum: 0 } },
      },
    },
  },
};

/** Extra schemas by component name. */
export const OPENAPI_EXTRA_SCHEMAS: Readonly<Record<string, Schema>> = {
  readiness: readinessSchema,
  'jsonrpc-message': jsonRpcMessageSchema,
  'admin-whoami': adminWhoamiSchema,
  'admin-agent-page': adminAgentPageSchema,
  'admin-overview': adminOverviewSchema,
};
