import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createRoostMcpServer, ListenerMailWatch } from '#mcp';
import { USER_AGENT, type Session } from '../session';

/** Longest `wait_for_mail` over stdio (no HTTP timeout in the way). */
const MAX_WAIT_MS = 600_000;

/**
 * `roost mcp`: the MCP tools over stdio for the configured agent. Configuration problems (no agent,
 * no token) fail before the server starts, on stderr with exit code 3, like every other command.
 */
export async function mcp(session: Session): Promise<void> {
  const client = session.client();
  const server = createRoostMcpServer({
    client,
    agent: session.requireAgent(),
    watch: new ListenerMailWatch({ url: session.ctx.url, token: client.token, userAgent: USER_AGENT }),
    maxWaitMs: MAX_WAIT_MS,
  });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
  process.stdin.once('end', () => void server.close());
  await server.connect(transport);
  await closed;
}
