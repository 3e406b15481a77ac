import { Injectable } from '@nestjs/common';
import { AgentsRepository, type AgentPatch } from '#db';
import {
  AsmtpError,
  agentResponseOf,
  badRequest,
  encodeBlocksCursor,
  isAllowlistEntry,
  isHandle,
  isVisibleTo,
  notFound,
  type Agent,
  type BlocksQuery,
} from '#domain';
import { validateRequest } from '#schemas';

/** The self surface (`/agents/me*`, ASMTP.md §3.7) and discovery (§3.8). */
@Injectable()
export class AgentsService {
  constructor(private readonly agents: AgentsRepository) {}

  me(agent: Agent) {
    return agentResponseOf(agent);
  }

  async updateMe(agent: Agent, body: Record<string, unknown>) {
    const valid = validateRequest('agent-self-patch', body);
    const patch: AgentPatch = {};
    if (valid.display_name !== undefined) patch.display_name = valid.display_name;
    if (valid.description !== undefined) patch.description = valid.description;
    if (valid.card_body !== undefined) patch.card_body = valid.card_body;
    if (Object.keys(patch).length === 0) throw badRequest('INVALID_UPDATE', 'no updatable field given');
    return agentResponseOf(await this.require(this.agents.update(agent.id, patch, Date.now())));
  }

  allowlist(agent: Agent) {
    return { entries: agent.allowlist };
  }

  async addToAllowlist(agent: Agent, body: Record<string, unknown>) {
    const { entries } = validateRequest('allowlist-add', body);
    const updated = await this.require(this.agents.addAllowlistEntries(agent.id, entries, Date.now()));
    return { entries: updated.allowlist };
  }

  async removeFromAllowlist(agent: Agent, entry: string) {
    if (!isAllowlistEntry(entry)) throw badRequest('INVALID_ALLOWLIST_ENTRY', 'not an allowlist entry');
    const updated = await this.agents.removeAllowlistEntry(agent.id, entry, Date.now());
    if (!updated) throw notFound(`${entry} is not on the allowlist`);
    return { entries: updated.allowlist };
  }

  async blocks(agent: Agent, query: BlocksQuery) {
    const rows = await this.agents.listBlocks(agent.id, query.limit, query.offset);
    return {
      blocks: rows.map((row) => blockView(row.blocked_handle, row.created_at)),
      next_cursor: rows.length === query.limit ? encodeBlocksCursor(query.offset + rows.length) : null,
    };
  }

  async block(agent: Agent, body: Record<string, unknown>) {
    const { handle } = validateRequest('block-create', body);
    if (handle === agent.handle) throw badRequest('INVALID_BLOCK_TARGET', 'an agent cannot block itself');
    const row = await this.agents.addBlock(agent.id, handle, Date.now());
    return blockView(row.blocked_handle, row.created_at);
  }

  async unblock(agent: Agent, handle: string) {
    if (!isHandle(handle)) throw badRequest('INVALID_HANDLE', 'not a handle');
    if (!(await this.agents.removeBlock(agent.id, handle))) throw notFound(`${handle} is not blocked`);
    return { unblocked: true };
  }

  /** A visible agent (§1.8) or the same 404 whether it is missing or private. */
  async discover(caller: Agent, owner: string, name: string): Promise<Agent> {
    const handle = `@${owner}.${name}`;
    // Segments are not grammar-checked (§3.8), but no agent has a non-handle name: skip the query.
    const target = isHandle(handle) ? await this.agents.findByHandle(handle) : undefined;
    if (!target || !isVisibleTo(target, caller.handle)) throw notFound(`agent ${handle} not found`);
    return target;
  }

  async profile(caller: Agent, owner: string, name: string) {
    const target = await this.discover(caller, owner, name);
    const own = target.id === caller.id;
    return { agent: agentResponseOf(target), viewer: { relationship: own ? 'owner' : 'none', can_edit: own } };
  }

  async card(caller: Agent, owner: string, name: string): Promise<string> {
    return (await this.discover(caller, owner, name)).card_body ?? '';
  }

  private async require(update: Promise<Agent | undefined>): Promise<Agent> {
    const agent = await update;
    // The caller was authenticated a moment ago; a concurrent delete makes its token unknown.
    if (!agent) throw new AsmtpError(401, 'UNAUTHORIZED', 'unknown agent bearer');
    return agent;
  }
}

const blockView = (handle: string, createdAt: number) => ({
  blocked_agent_id: handle,
  blocked_handle: handle,
  created_at: createdAt,
});
