import type { AdminAgent, AdminAgentInput, Org, OrgInput } from '#client';
import { requireHandle } from '../args';
import { forgetAgentToken, storeAgentToken } from '../config';
import { CliError, EXIT } from '../output';
import type { Session } from '../session';

export interface AgentFieldOptions {
  policy?: string;
  displayName?: string;
  description?: string;
  visibility?: string;
  contentGuard?: string;
  retentionDays?: string;
}

function agentFields(options: AgentFieldOptions): AdminAgentInput {
  const fields: AdminAgentInput = {};
  if (options.policy !== undefined) fields.policy = options.policy as AdminAgentInput['policy'];
  if (options.displayName !== undefined) fields.display_name = options.displayName;
  if (options.description !== undefined) fields.description = options.description === '' ? null : options.description;
  if (options.visibility !== undefined) fields.visibility = options.visibility as AdminAgentInput['visibility'];
  if (options.contentGuard !== undefined)
    fields.content_guard = options.contentGuard as AdminAgentInput['content_guard'];
  if (options.retentionDays !== undefined)
    fields.retention_days = options.retentionDays === 'none' ? null : Number(options.retentionDays);
  return fields;
}

const agentLine = (a: AdminAgent) =>
  `${a.handle} ${a.policy} ${a.visibility}${a.allowlist.length ? ` allow=${a.allowlist.join(',')}` : ''}`;

/** Tokens are stored (0600) and left out of the output unless --show-token asks for them, once. */
function withoutToken<T extends { token?: string; admin_token?: string }>(value: T, show: boolean): T {
  if (show) return value;
  const { token: _t, admin_token: _a, ...rest } = value;
  return rest as T;
}

export async function agentCreate(
  session: Session,
  handle: string,
  options: AgentFieldOptions & { showToken?: boolean },
): Promise<void> {
  requireHandle(handle);
  const created = await session.admin().createAgent(handle, agentFields(options));
  const file = storeAgentToken(session.ctx.profile, handle, created.token);
  session.print.out(
    () =>
      `created ${agentLine(created)}\ntoken stored in ${file} (profile ${session.ctx.profile})${options.showToken ? `\ntoken (shown once): ${created.token}` : ''}`,
    { ...withoutToken(created, options.showToken === true), token_file: file },
  );
}

export async function agentList(session: Session): Promise<void> {
  const agents = await session.admin().agents();
  session.print.out(() => (agents.length ? agents.map(agentLine).join('\n') : 'no agents'), { agents });
}

export async function agentShow(session: Session, handle: string): Promise<void> {
  requireHandle(handle);
  const agent = await session.admin().agent(handle);
  session.print.out(() => JSON.stringify(agent, null, 2), agent);
}

export async function agentSet(session: Session, handle: string, options: AgentFieldOptions): Promise<void> {
  requireHandle(handle);
  const fields = agentFields(options);
  if (Object.keys(fields).length === 0)
    throw new CliError(
      'nothing to change',
      EXIT.USAGE,
      'give --policy, --display-name, --description, --visibility, --content-guard or --retention-days',
      'EMPTY',
    );
  const agent = await session.admin().updateAgent(handle, fields);
  session.print.out(() => `updated ${agentLine(agent)}`, agent);
}

export async function agentRotate(session: Session, handle: string, options: { showToken?: boolean }): Promise<void> {
  requireHandle(handle);
  const rotated = await session.admin().rotateAgentToken(handle);
  const file = storeAgentToken(session.ctx.profile, handle, rotated.token);
  session.print.out(
    () =>
      `rotated the token of ${handle}; stored in ${file}${options.showToken ? `\ntoken (shown once): ${rotated.token}` : ''}`,
    { ...withoutToken(rotated, options.showToken === true), token_file: file },
  );
}

export async function agentRemove(session: Session, handle: string): Promise<void> {
  requireHandle(handle);
  await session.admin().deleteAgent(handle);
  forgetAgentToken(session.ctx.profile, handle);
  session.print.out(`removed ${handle}`, { removed: handle });
}

export interface OrgFieldOptions {
  retentionDays?: string;
  contentGuard?: string;
  maxAgents?: string;
}

function orgFields(options: OrgFieldOptions): OrgInput {
  const fields: OrgInput = {};
  if (options.retentionDays !== undefined)
    fields.retention_days = options.retentionDays === 'none' ? null : Number(options.retentionDays);
  if (options.contentGuard !== undefined) fields.content_guard = options.contentGuard as OrgInput['content_guard'];
  if (options.maxAgents !== undefined)
    fields.max_agents = options.maxAgents === 'none' ? null : Number(options.maxAgents);
  return fields;
}

const orgLine = (o: Org) =>
  `${o.name} retention=${o.retention_days ?? 'forever'} guard=${o.content_guard} max_agents=${o.max_agents ?? '-'}${o.agent_count !== undefined ? ` agents=${o.agent_count}` : ''}`;

export async function orgCreate(
  session: Session,
  name: string,
  options: OrgFieldOptions & { showToken?: boolean },
): Promise<void> {
  const org = await session.admin().createOrg(name, orgFields(options));
  session.print.out(
    () =>
      `created org ${orgLine(org)}${options.showToken ? `\norg admin token (shown once; manages @${name}.* only): ${org.admin_token}` : '\n(its admin token was not shown: rerun `roost admin org rotate-token ' + name + ' --show-token` to get one)'}`,
    withoutToken(org, options.showToken === true),
  );
}

export async function orgList(session: Session): Promise<void> {
  const orgs = await session.admin().orgs();
  session.print.out(() => (orgs.length ? orgs.map(orgLine).join('\n') : 'no organizations'), { orgs });
}

export async function orgShow(session: Session, name: string): Promise<void> {
  const org = await session.admin().org(name);
  session.print.out(() => orgLine(org), org);
}

export async function orgSet(session: Session, name: string, options: OrgFieldOptions): Promise<void> {
  const fields = orgFields(options);
  if (Object.keys(fields).length === 0)
    throw new CliError(
      'nothing to change',
      EXIT.USAGE,
      'give --retention-days, --content-guard or --max-agents',
      'EMPTY',
    );
  const org = await session.admin().updateOrg(name, fields);
  session.print.out(() => `updated org ${orgLine(org)}`, org);
}

export async function orgRotate(session: Session, name: string, options: { showToken?: boolean }): Promise<void> {
  const org = await session.admin().rotateOrgToken(name);
  session.print.out(
    () =>
      `rotated the admin token of org ${name}${options.showToken ? `\norg admin token (shown once): ${org.admin_token}` : ' (pass --show-token to see it)'}`,
    withoutToken(org, options.showToken === true),
  );
}

export async function orgRemove(session: Session, name: string): Promise<void> {
  await session.admin().deleteOrg(name);
  session.print.out(`removed org ${name}`, { removed: name });
}
