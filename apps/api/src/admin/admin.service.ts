import { Injectable } from '@nestjs/common';
import { FrameBus } from '#bus';
import { AuthService, type AdminScope } from '#core';
import { AgentsRepository, OrgsRepository, type AgentPatch, type Org, type OrgPatch } from '#db';
import {
  AsmtpError,
  adminAgentView,
  badRequest,
  hashToken,
  isHandle,
  isOrgName,
  mintToken,
  notFound,
  ownerOf,
  type Agent,
} from '#domain';
import { validateRequest } from '#schemas';

const AGENT_FIELDS = [
  'policy',
  'display_name',
  'description',
  'card_body',
  'visibility',
  'content_guard',
  'retention_days',
] as const;
const ORG_FIELDS = ['retention_days', 'content_guard', 'max_agents'] as const;

/** What `pick` returns: the fields present, with `policy: null` dropped. */
type Picked<B, K extends keyof B> = { [F in K]?: F extends 'policy' ? Exclude<B[F], null> : B[F] };

/** Fields present in a validated body; `policy: null` counts as omitted (ASMTP.md §1.4). */
function pick<B extends object, K extends keyof B & string>(body: B, fields: readonly K[]): Picked<B, K> {
  const picked: Picked<B, K> = {};
  for (const field of fields) {
    if (!(field in body) || (field === 'policy' && body[field] === null)) continue;
    // tsc cannot follow the null check into the conditional type; the line above is that check.
    picked[field] = body[field] as Picked<B, K>[K];
  }
  return picked;
}

/**
 * Provisioning (`/_admin/agents…`, ASMTP.md §1.4) and organizations (EXTENSIONS.md §5). An
 * organization's admin token sees only agents `@<org>.*`; everything else is a plain 404.
 */
@Injectable()
export class AdminService {
  constructor(
    private readonly agents: AgentsRepository,
    private readonly orgs: OrgsRepository,
    private readonly bus: FrameBus,
    private readonly auth: AuthService,
  ) {}

  /** A new bearer token, dropped from this node's unknown-token cache before anyone can use it. */
  private mint(): string {
    const token = mintToken();
    this.auth.tokenIssued(hashToken(token));
    return token;
  }

  async createAgent(scope: AdminScope, body: Record<string, unknown>) {
    const valid = validateRequest('admin-agent-create', body);
    const handle = valid.handle;
    const owner = ownerOf(handle);
    if (!inScope(scope, owner)) throw notFound(`agent ${handle} not found`);
    const fields: AgentPatch = pick(valid, AGENT_FIELDS);
    const token = this.mint();
    const agent = await this.agents.create({
      handle,
      owner,
      token_hash: hashToken(token),
      policy: fields.policy ?? 'allowlist',
      display_name: fields.display_name ?? handle,
      description: fields.description ?? null,
      card_body: fields.card_body ?? null,
      visibility: fields.visibility ?? 'private',
      content_guard: fields.content_guard ?? null,
      retention_days: fields.retention_days ?? null,
      created_at: Date.now(),
    });
    if (agent === 'quota')
      throw new AsmtpError(429, 'QUOTA_EXCEEDED', `organization ${owner} has reached its agent quota`);
    if (agent === 'exists') throw new AsmtpError(409, 'AGENT_EXISTS', `agent ${handle} already exists`);
    return adminAgentView(agent, token);
  }

  async listAgents(scope: AdminScope) {
    const agents = await this.agents.list(scope.kind === 'org' ? scope.org : undefined);
    return { agents: agents.map((agent) => adminAgentView(agent)) };
  }

  /** The agent named by a path `{handle}` within the caller's scope: 400 INVALID_HANDLE, then 404. */
  async findAgent(scope: AdminScope, handle: string): Promise<Agent> {
    if (!isHandle(handle)) throw badRequest('INVALID_HANDLE', 'not a handle');
    const agent = inScope(scope, ownerOf(handle)) ? await this.agents.findByHandle(handle) : undefined;
    if (!agent) throw notFound(`agent ${handle} not found`);
    return agent;
  }

  showAgent(agent: Agent) {
    return adminAgentView(agent);
  }

  async updateAgent(agent: Agent, body: Record<string, unknown>) {
    const valid = validateRequest('admin-agent-patch', body);
    const patch: AgentPatch = pick(valid, AGENT_FIELDS);
    if (Object.keys(patch).length === 0) return adminAgentView(agent);
    const updated = await this.agents.update(agent.id, patch, Date.now());
    if (!updated) throw notFound(`agent ${agent.handle} not found`);
    return adminAgentView(updated);
  }

  async rotateAgentToken(agent: Agent) {
    const token = this.mint();
    const updated = await this.agents.rotateToken(agent.id, hashToken(token), Date.now());
    if (!updated) throw notFound(`agent ${agent.handle} not found`);
    await this.revoke(agent.id);
    return adminAgentView(updated, token);
  }

  /** EXTENSIONS.md §5: what the agent delivered stays with its recipients; its sockets close (4001). */
  async deleteAgent(agent: Agent): Promise<void> {
    if (!(await this.agents.delete(agent.id, Date.now()))) throw notFound(`agent ${agent.handle} not found`);
    await this.revoke(agent.id);
  }

  async createOrg(body: Record<string, unknown>) {
    const valid = validateRequest('org-create', body);
    const token = this.mint();
    const org = await this.orgs.create(valid.name, hashToken(token), pick(valid, ORG_FIELDS), Date.now());
    if (!org) throw new AsmtpError(409, 'ORG_EXISTS', `organization ${valid.name} already exists`);
    return orgView(org, token);
  }

  async listOrgs() {
    return { orgs: (await this.orgs.list()).map((org) => orgView(org)) };
  }

  async findOrg(name: string): Promise<Org> {
    const org = isOrgName(name) ? await this.orgs.find(name) : undefined;
    if (!org) throw notFound(`organization ${name} not found`);
    return org;
  }

  showOrg(org: Org) {
    return orgView(org);
  }

  async updateOrg(org: Org, body: Record<string, unknown>) {
    const patch: OrgPatch = pick(validateRequest('org-patch', body), ORG_FIELDS);
    const updated = Object.keys(patch).length === 0 ? org : await this.orgs.update(org.name, patch, Date.now());
    if (!updated) throw notFound(`organization ${org.name} not found`);
    return orgView(updated);
  }

  async rotateOrgToken(org: Org) {
    const token = this.mint();
    const updated = await this.orgs.rotateToken(org.name, hashToken(token), Date.now());
    if (!updated) throw notFound(`organization ${org.name} not found`);
    return orgView(updated, token);
  }

  async deleteOrg(org: Org): Promise<void> {
    const members = await this.orgs.delete(org.name, Date.now());
    if (!members) throw notFound(`organization ${org.name} not found`);
    await Promise.all(members.map((id) => this.revoke(id)));
  }

  /** Close the agent's open sockets (EXTENSIONS.md: within a second, code 4001). */
  private revoke(agentId: number): Promise<void> {
    return this.bus.publishControl({ kind: 'revoke', mailbox_id: agentId }).catch(() => undefined);
  }
}

const inScope = (scope: AdminScope, owner: string): boolean => scope.kind === 'operator' || scope.org === owner;

function orgView(org: Org, token?: string): Record<string, unknown> {
  return {
    name: org.name,
    ...(token !== undefined ? { admin_token: token } : {}),
    retention_days: org.retention_days,
    content_guard: org.content_guard,
    max_agents: org.max_agents,
    created_at: org.created_at,
    updated_at: org.updated_at,
  };
}
