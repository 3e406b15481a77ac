import { localNameOf, ownerOf, type InboundPolicy } from './handles';

export type Visibility = 'public' | 'private';
export type GuardPolicy = 'off' | 'warn' | 'block';

/** An agent as the services see it (never its token). */
export interface Agent {
  id: number;
  handle: string;
  policy: InboundPolicy;
  allowlist: string[];
  display_name: string;
  description: string | null;
  card_body: string | null;
  visibility: Visibility;
  content_guard: GuardPolicy | null;
  retention_days: number | null;
  created_at: number;
  updated_at: number;
}

/** What the accept path reads of a recipient: its id (mailbox) and its inbound policy (§1.5). */
export type RecipientAgent = Pick<Agent, 'id' | 'handle' | 'policy' | 'allowlist'>;

/** Byte order, as the reference sorts allowlists and handles (handles are ASCII). */
export const byteOrder = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** `AdminAgent` of ASMTP.md §1.4, reference key order; `token` only on create and rotate. */
export function adminAgentView(agent: Agent, token?: string): Record<string, unknown> {
  const view: Record<string, unknown> = { handle: agent.handle };
  if (token !== undefined) view.token = token;
  view.policy = agent.policy;
  view.allowlist = [...agent.allowlist].sort(byteOrder);
  view.display_name = agent.display_name;
  view.description = agent.description;
  view.card_body = agent.card_body;
  view.visibility = agent.visibility;
  if (agent.content_guard !== null) view.content_guard = agent.content_guard;
  if (agent.retention_days !== null) view.retention_days = agent.retention_days;
  return view;
}

/** `AgentResponse` of ASMTP.md §3.7 (self and discovery). */
export function agentResponseOf(agent: Agent): Record<string, unknown> {
  const owner = ownerOf(agent.handle);
  return {
    canonical_handle: agent.handle,
    display_name: agent.display_name,
    description: agent.description,
    card_body: agent.card_body,
    visibility: agent.visibility,
    inbound_policy: agent.policy,
    image_url: null,
    owner_image_url: null,
    skills: null,
    inactive: false,
    paused: false,
    is_online: true,
    owner_label: `@${owner}`,
    owner_display_name: owner,
    owner_id: owner,
    namespace: owner,
    id: agent.handle,
    local_name: localNameOf(agent.handle),
    owner_type: 'account',
    scope: 'personal',
    created_at: agent.created_at,
    updated_at: agent.updated_at,
  };
}
