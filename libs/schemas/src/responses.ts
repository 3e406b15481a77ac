import type { SchemaName } from './schemas';

interface ResponseRule {
  method: string;
  path: RegExp;
  status: number;
  schema: SchemaName;
}

const seg = '[^/]+';
const RULES: ResponseRule[] = [
  { method: 'GET', path: /^\/(healthz|health)$/, status: 200, schema: 'health' },
  { method: 'POST', path: /^\/messages$/, status: 202, schema: 'accepted' },
  { method: 'GET', path: /^\/messages$/, status: 200, schema: 'messages-batch' },
  { method: 'GET', path: new RegExp(`^/messages/${seg}$`), status: 200, schema: 'stored-envelope' },
  { method: 'POST', path: new RegExp(`^/messages/${seg}/receipts$`), status: 201, schema: 'receipt' },
  { method: 'GET', path: new RegExp(`^/messages/${seg}/receipts$`), status: 200, schema: 'receipt-list' },
  { method: 'GET', path: new RegExp(`^/messages/${seg}/status$`), status: 200, schema: 'delivery-status' },
  { method: 'GET', path: /^\/mailbox$/, status: 200, schema: 'mailbox-page' },
  { method: 'POST', path: /^\/mailbox\/read$/, status: 200, schema: 'mailbox-read-result' },
  { method: 'POST', path: /^\/files$/, status: 201, schema: 'file' },
  { method: 'GET', path: /^\/agents\/me$/, status: 200, schema: 'agent-response' },
  { method: 'PATCH', path: /^\/agents\/me$/, status: 200, schema: 'agent-response' },
  { method: 'GET', path: /^\/agents\/me\/allowlist$/, status: 200, schema: 'allowlist' },
  { method: 'POST', path: /^\/agents\/me\/allowlist$/, status: 200, schema: 'allowlist' },
  { method: 'DELETE', path: new RegExp(`^/agents/me/allowlist/${seg}$`), status: 200, schema: 'allowlist' },
  { method: 'GET', path: /^\/agents\/me\/blocks$/, status: 200, schema: 'blocks-page' },
  { method: 'POST', path: /^\/agents\/me\/blocks$/, status: 201, schema: 'block' },
  { method: 'DELETE', path: new RegExp(`^/agents/me/blocks/${seg}$`), status: 200, schema: 'unblocked' },
  { method: 'GET', path: new RegExp(`^/agents/${seg}/${seg}$`), status: 200, schema: 'agent-discovery' },
  { method: 'GET', path: /^\/search$/, status: 200, schema: 'search' },
  { method: 'GET', path: /^\/search\/agents$/, status: 200, schema: 'search-agents' },
  { method: 'GET', path: /^\/search\/messages$/, status: 200, schema: 'search-messages' },
  { method: 'POST', path: /^\/_admin\/agents$/, status: 201, schema: 'admin-agent' },
  { method: 'GET', path: /^\/_admin\/agents$/, status: 200, schema: 'admin-agent-listing' },
  { method: 'GET', path: new RegExp(`^/_admin/agents/${seg}$`), status: 200, schema: 'admin-agent' },
  { method: 'PATCH', path: new RegExp(`^/_admin/agents/${seg}$`), status: 200, schema: 'admin-agent' },
  { method: 'POST', path: new RegExp(`^/_admin/agents/${seg}/rotate-token$`), status: 200, schema: 'admin-agent' },
  { method: 'POST', path: /^\/schedules$/, status: 201, schema: 'schedule' },
  { method: 'GET', path: /^\/schedules$/, status: 200, schema: 'schedule-list' },
  { method: 'GET', path: new RegExp(`^/schedules/${seg}$`), status: 200, schema: 'schedule' },
  { method: 'PATCH', path: new RegExp(`^/schedules/${seg}$`), status: 200, schema: 'schedule' },
  { method: 'DELETE', path: new RegExp(`^/schedules/${seg}$`), status: 200, schema: 'schedule' },
  { method: 'POST', path: /^\/_admin\/orgs$/, status: 201, schema: 'org' },
  { method: 'GET', path: /^\/_admin\/orgs$/, status: 200, schema: 'org-list' },
  { method: 'GET', path: new RegExp(`^/_admin/orgs/${seg}$`), status: 200, schema: 'org' },
  { method: 'PATCH', path: new RegExp(`^/_admin/orgs/${seg}$`), status: 200, schema: 'org' },
  { method: 'POST', path: new RegExp(`^/_admin/orgs/${seg}/rotate-token$`), status: 200, schema: 'org' },
  // The console's admin reads (docs/console-api.md): the agent route's own shape.
  { method: 'GET', path: /^\/_admin\/whoami$/, status: 200, schema: 'admin-whoami' },
  { method: 'GET', path: /^\/_admin\/overview$/, status: 200, schema: 'admin-overview' },
  { method: 'GET', path: new RegExp(`^/_admin/agents/${seg}/mailbox$`), status: 200, schema: 'mailbox-page' },
  {
    method: 'GET',
    path: new RegExp(`^/_admin/agents/${seg}/messages/${seg}$`),
    status: 200,
    schema: 'stored-envelope',
  },
  { method: 'GET', path: new RegExp(`^/_admin/agents/${seg}/receipts$`), status: 200, schema: 'receipt-list' },
  { method: 'GET', path: new RegExp(`^/_admin/agents/${seg}/status$`), status: 200, schema: 'delivery-status' },
  { method: 'GET', path: new RegExp(`^/_admin/agents/${seg}/schedules$`), status: 200, schema: 'schedule-list' },
  { method: 'PATCH', path: new RegExp(`^/_admin/agents/${seg}/schedules/${seg}$`), status: 200, schema: 'schedule' },
  { method: 'DELETE', path: new RegExp(`^/_admin/agents/${seg}/schedules/${seg}$`), status: 200, schema: 'schedule' },
];

/** Extension rules registered by later features (receipts, schedules, …). */
export function registerResponseSchema(rule: ResponseRule): void {
  RULES.push(rule);
}

/**
 * The wire schema a response must satisfy: `error` for any JSON error, the route's schema for a
 * success, undefined when the body is not JSON (204, file bytes, card markdown).
 */
export function responseSchemaFor(method: string, path: string, status: number): SchemaName | undefined {
  if (status >= 400) return 'error';
  return RULES.find((rule) => rule.method === method && rule.status === status && rule.path.test(path))?.schema;
}
