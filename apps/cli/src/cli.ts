import type { Command } from 'commander';
import { registerSelfCommands } from './cli-self';
import { die, EXIT } from './output';
import { Session, VERSION, type GlobalOptions } from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- lazy: a command's module loads only when it runs */
// Command modules load only when their command runs: `roost send` never loads the listener, the
// worktree mailbox or the embedded operator.
const messages = () => require('./commands/messages') as typeof import('./commands/messages');
const admin = () => require('./commands/admin') as typeof import('./commands/admin');
const schedule = () => require('./commands/schedule') as typeof import('./commands/schedule');
const config = () => require('./commands/config') as typeof import('./commands/config');
const workspace = () => require('./commands/workspace') as typeof import('./commands/workspace');
const samp = () => require('./commands/samp') as typeof import('./commands/samp');
const mcp = () => require('./commands/mcp') as typeof import('./commands/mcp');
// commander too: `roost mcp` alone, as harnesses start it, has no command line to parse.
const commander = () => require('commander') as typeof import('commander');

const option = (flags: string, description: string) => new (commander().Option)(flags, description);
const collect = (value: string, previous: string[] = []) => [...previous, value];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- commander passes each command's own positional types
type Handler = (session: Session, ...args: any[]) => unknown;

/** Wrap a handler: build the session from the merged global/local options, map failures to exit codes. */
function act(handler: () => Handler, admin = false) {
  return async (...args: unknown[]) => {
    const command = args[args.length - 1] as Command;
    await run(command.optsWithGlobals<GlobalOptions & Record<string, unknown>>(), handler, admin, [
      ...args.slice(0, -2),
      command.opts(),
    ]);
  };
}

async function run(options: GlobalOptions, handler: () => Handler, admin: boolean, args: unknown[]): Promise<void> {
  let session: Session | undefined;
  try {
    session = new Session(options);
    await handler()(session, ...args);
  } catch (error) {
    die(error, options.json === true, { ...(session?.where ?? {}), admin });
  }
}

function composeOptions(command: Command): Command {
  return command
    .option('-t, --text <text>', 'a text part (repeatable)', collect)
    .option('--stdin', 'read a text part from standard input')
    .option('--data <json>', 'a data part: a JSON object (repeatable)', collect)
    .option(
      '--file <path>',
      'upload and attach a file, or attach one uploaded before by its id (file_…) (repeatable)',
      collect,
    )
    .option('--image <path>', 'upload and attach an image (repeatable)', collect)
    .option('-s, --subject <subject>', 'subject')
    .option('--cc <handle>', 'carbon copy (repeatable)', collect)
    .option('--monitor <mon_id>', 'ask for monitor facts (mon_…)')
    .option('--allow-warnings <codes>', 'accept despite these content guard findings (comma separated)')
    .option('--id <ulid>', 'envelope id to use (default: a fresh ULID); retrying with the same id is idempotent');
}

function agentFieldOptions(command: Command): Command {
  return command
    .addOption(option('--policy <policy>', 'inbound policy').choices(['open', 'allowlist']))
    .option('--display-name <name>', 'display name')
    .option('--description <text>', 'description ("" clears)')
    .addOption(option('--visibility <visibility>', 'discovery visibility').choices(['public', 'private']))
    .addOption(option('--content-guard <policy>', 'content guard override').choices(['off', 'warn', 'block']))
    .option('--retention-days <days>', 'retention override in days, or "none"');
}

export function program(): Command {
  const root = new (commander().Command)('roost')
    .description('Roost: durable mailboxes for AI agents (ASMTP). Docs: docs/cli.md')
    .version(VERSION)
    .option('--profile <name>', 'configuration profile (env ROOST_PROFILE)')
    .option('--url <url>', 'operator base URL (env ROOST_URL)')
    .option('--as <handle>', 'acting agent, @owner.name (env ROOST_AGENT)')
    .option('--token <token>', 'agent bearer for this command (env ROOST_TOKEN)')
    .option('--admin-token <token>', 'admin bearer for this command (env ROOST_ADMIN_TOKEN)')
    .option('--json', 'machine-readable output: one JSON document per result')
    .showHelpAfterError()
    .exitOverride();

  root
    .command('serve')
    .description('run the embedded all-in-one operator (PGlite unless DATABASE_URL is set)')
    .option('--port <port>', 'port (default 8025, env PORT)')
    .option('--host <host>', 'bind address (env ROOST_HOST)')
    .option('--data-dir <dir>', 'embedded database folder (env ROOST_DATA_DIR, default ./.roost)')
    .action(act(() => (require('./commands/serve') as typeof import('./commands/serve')).serve));

  const adminCmd = root.command('admin').description('provision agents and organizations (admin token)');
  const agent = adminCmd.command('agent').description('agents: /_admin/agents');
  agentFieldOptions(agent.command('create <handle>').description('register an agent and store its token (0600)'))
    .option('--show-token', 'also print the new token, once')
    .action(act(() => admin().agentCreate, true));
  agent
    .command('list')
    .description('list agents')
    .action(act(() => admin().agentList, true));
  agent
    .command('show <handle>')
    .description('show an agent')
    .action(act(() => admin().agentShow, true));
  agentFieldOptions(agent.command('set <handle>').description('change an agent')).action(
    act(() => admin().agentSet, true),
  );
  agent
    .command('rotate-token <handle>')
    .description('mint a new token (the old one stops working; open sockets close 4001) and store it')
    .option('--show-token', 'also print the new token, once')
    .action(act(() => admin().agentRotate, true));
  agent
    .command('remove <handle>')
    .description('delete an agent')
    .action(act(() => admin().agentRemove, true));

  const org = adminCmd.command('org').description('organizations: /_admin/orgs (operator admin token)');
  const orgFields = (command: Command) =>
    command
      .option('--retention-days <days>', 'keep envelopes this many days, or "none"')
      .addOption(option('--content-guard <policy>', 'content guard policy').choices(['off', 'warn', 'block']))
      .option('--max-agents <n>', 'agent quota, or "none"');
  orgFields(org.command('create <name>').description('create an organization'))
    .option('--show-token', 'print the organization admin token, once')
    .action(act(() => admin().orgCreate, true));
  org
    .command('list')
    .description('list organizations')
    .action(act(() => admin().orgList, true));
  org
    .command('show <name>')
    .description('show an organization')
    .action(act(() => admin().orgShow, true));
  orgFields(org.command('set <name>').description('change an organization')).action(act(() => admin().orgSet, true));
  org
    .command('rotate-token <name>')
    .description('mint a new organization admin token')
    .option('--show-token', 'print it, once')
    .action(act(() => admin().orgRotate, true));
  org
    .command('remove <name>')
    .description('delete an organization')
    .action(act(() => admin().orgRemove, true));

  composeOptions(root.command('send <to...>').description('send an envelope')).action(act(() => messages().send));
  root
    .command('inbox')
    .description('unread headers as triage lines (id age from subject type size markers)')
    .option('--all', 'read ones too')
    .option('--limit <n>', 'at most n lines (default 200)')
    .action(act(() => messages().inbox));
  root
    .command('show <ids...>')
    .description('print envelopes (marks them read); ids or short ids')
    .action(act(() => messages().show));
  root
    .command('read <ids...>')
    .description('mark envelopes read without printing them')
    .action(act(() => messages().read));
  composeOptions(root.command('reply <id>').description('reply to an envelope (in_reply_to, references, Re: subject)'))
    .option('--all', 'also copy every other recipient')
    .action(act(() => messages().reply));
  root
    .command('receipt <id> <status>')
    .description('post a receipt: accepted|rejected|deferred|needs_confirmation|applied|blocked')
    .option('--note <text>', 'note (≤ 2000 characters)')
    .option('--id <ulid>', 'receipt id (a retry with the same id is idempotent)')
    .action(act(() => messages().receipt));
  root
    .command('status <id>')
    .description('delivery status and receipts of an envelope you sent')
    .action(act(() => messages().status));

  registerSelfCommands(root, act);

  const sched = root.command('schedule').description('repeated and delayed deliveries');
  sched
    .command('create <to...>')
    .description(
      'create a schedule: --at for one delayed send; --every to repeat, with --count or --until (one is required)',
    )
    .option('-t, --text <text>', 'a text part (repeatable)', collect)
    .option('--data <json>', 'a data part (repeatable)', collect)
    .option('-s, --subject <subject>', 'subject')
    .option('--cc <handle>', 'carbon copy (repeatable)', collect)
    .option(
      '--every <duration>',
      'repeat interval, e.g. 1h, 30m; at least the operator minimum ROOST_SCHEDULE_MIN_INTERVAL_MS (default 1m); needs --count or --until',
    )
    .option('--at <when>', 'first (or only) run: ISO date, epoch ms, or a duration from now')
    .option('--count <n>', 'stop after n sends (a repeating schedule needs this or --until)')
    .option('--until <when>', 'stop after this time (a repeating schedule needs this or --count)')
    .action(act(() => schedule().create));
  sched
    .command('list')
    .description('your schedules')
    .action(act(() => schedule().list));
  sched
    .command('show <id>')
    .description('one schedule (id or short id)')
    .action(act(() => schedule().show));
  sched
    .command('pause <id>')
    .description('pause')
    .action(act(() => (s: Session, id: string) => schedule().setStatus(s, id, 'paused')));
  sched
    .command('resume <id>')
    .description('resume')
    .action(act(() => (s: Session, id: string) => schedule().setStatus(s, id, 'active')));
  sched
    .command('cancel <id>')
    .description('cancel (stays readable)')
    .action(act(() => schedule().cancel));

  root
    .command('listen')
    .description('stream frames as JSON lines on stdout (diagnostics on stderr); keeps a cursor')
    .option('--no-resume', 'plain ASMTP: never ask for server-side resume')
    .option('--no-catch-up', 'no REST catch-up either: live frames only')
    .option('--cursor <file>', 'cursor file (default under $XDG_STATE_HOME/roost/cursors)')
    .option('--max-attempts <n>', 'give up after n failed connection attempts in a row')
    .action(act(() => (require('./commands/listen') as typeof import('./commands/listen')).listen));
  root
    .command('mcp')
    .description('MCP server on stdio for the acting agent (tools: send, inbox, read, wait_for_mail, …)')
    .action(act(() => mcp().mcp));
  root
    .command('doctor')
    .description('check configuration, operator, token, push and resume')
    .action(act(() => (require('./commands/doctor') as typeof import('./commands/doctor')).doctor));

  root
    .command('mirror')
    .description('worktree mailbox: INBOX.md ← mail; OUTBOX.md, RECEIPTS.md → sent')
    .option('--once', 'one pass, then exit')
    .option('--dir <dir>', 'worktree root (default: the nearest .roost/ or the working directory)')
    .option('--interval <ms>', 'watch: poll local files this often (default 1000)')
    .action(act(() => workspace().mirror));
  root
    .command('install')
    .description('managed mailbox block in AGENTS.md/CLAUDE.md and Claude Code/Codex hooks running `roost hook`')
    .option('--dir <dir>', 'worktree root (default: the working directory)')
    .option('--no-claude', 'skip .claude/settings.json')
    .option('--no-codex', 'skip .codex/hooks.json')
    .option('--mcp', 'also register `roost mcp`: .mcp.json (Claude Code), .codex/config.toml (Codex)')
    .option(
      '--command <cmd>',
      'how harnesses start roost (default: absolute node + this CLI, no PATH needed; e.g. "roost")',
    )
    .action(act(() => workspace().install));
  root
    .command('uninstall')
    .description('remove exactly what `roost install` added')
    .option('--dir <dir>', 'worktree root (default: the working directory)')
    .action(act(() => workspace().uninstall));
  root
    .command('hook')
    .description('for harness hooks: print new unread triage lines, nothing when nothing is new')
    .option('--event <event>', 'SessionStart | PostToolUse | Stop (sets the output shape)')
    .action(async (options: { event?: string }, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      const hook = require('./hook') as typeof import('./hook');
      process.exitCode = await hook.runHook({ ...globals, event: options.event });
    });

  const sampCmd = root.command('samp').description('SAMP v1 bridge (see docs/samp.md)');
  sampCmd
    .command('import <dir>')
    .description('post the records of log-<alias>.jsonl files as envelopes (deterministic ids: re-import is a no-op)')
    .option('--owner <org>', "map alias x to @<org>.x (default: the acting agent's organization)")
    .option('--map <alias=handle>', 'explicit alias mapping (repeatable)', collect)
    .action(act(() => samp().importDir));
  sampCmd
    .command('export <dir>')
    .description("write the acting agent's mailbox as SAMP v1 JSONL (log-<alias>.jsonl)")
    .option('--map <alias=handle>', 'explicit alias mapping (repeatable)', collect)
    .action(act(() => samp().exportDir));

  const cfg = root.command('config').description('profiles, per-folder defaults and stored tokens');
  cfg
    .command('show')
    .description('the resolved configuration (tokens never shown)')
    .action(act(() => config().show));
  cfg
    .command('profile <name>')
    .description('create or change a profile in $XDG_CONFIG_HOME/roost/config.json')
    .option('--url <url>', 'operator base URL')
    .option('--agent <handle>', 'default agent')
    .option('--default', 'make it the default profile')
    .action(
      act(
        () => (s: Session, name: string, o: { url?: string; agent?: string; default?: boolean }) =>
          config().profile(s, name, o),
      ),
    );
  cfg
    .command('use <handle>')
    .description('make <handle> the default agent of this folder (.roost/config.json)')
    .option('--dir <dir>', 'folder (default: the working directory)')
    .option('--for-profile <name>', 'profile for this folder')
    .action(
      act(
        () => (s: Session, handle: string, o: { dir?: string; forProfile?: string }) =>
          config().use(s, handle, { dir: o.dir, profile: o.forProfile }),
      ),
    );
  cfg
    .command('token <handle>')
    .description("store an agent's token, read from stdin (0600)")
    .action(act(() => config().token));
  cfg
    .command('admin-token')
    .description('store the admin token, read from stdin (0600)')
    .action(act(() => config().adminToken));
  return root;
}

export async function main(argv: string[]): Promise<void> {
  // The same as through commander (no options, no arguments), without loading it: part of the
  // MCP server's start-up budget (bench `mcp`).
  if (argv.length === 3 && argv[2] === 'mcp') return run({}, () => mcp().mcp, false, [{}]);
  const root = program();
  try {
    await root.parseAsync(argv);
  } catch (error) {
    if (error instanceof commander().CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      )
        process.exit(EXIT.OK);
      process.exit(EXIT.USAGE);
    }
    die(error, argv.includes('--json'));
  }
}
