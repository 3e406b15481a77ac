/**
 * Response and request shapes the OpenAPI document needs that no wire schema describes (the
 * server does not validate them: probes, the MCP envelope). JSON
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

/** Extra schemas by component name. */
export const OPENAPI_EXTRA_SCHEMAS: Readonly<Record<string, Schema>> = {
  readiness: readinessSchema,
  'jsonrpc-message': jsonRpcMessageSchema,
};
