import type { Command } from 'commander';
import type { Session } from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- lazy: a handler's module loads only when its command runs */
// Registered here rather than in cli.ts so the command table stays short; the handlers load only
// when their command runs.
const self = () => require('./commands/self') as typeof import('./commands/self');

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- commander passes each command's own positional types
type Handler = (session: Session, ...args: any[]) => unknown;
type Act = (handler: () => Handler) => (...args: unknown[]) => Promise<void>;

/** `me`, `agents`, `search`, `files` and `mailbox` (any direction): parity with the ASMTP CLI. */
export function registerSelfCommands(root: Command, act: Act): void {
  const me = root.command('me').description("the acting agent's own profile, allowlist and blocks");
  me.command('show')
    .description('profile: display name, description, policy, visibility, card')
    .action(act(() => self().meShow));
  me.command('update')
    .description('change the profile')
    .option('--display-name <name>', 'display name (non-empty)')
    .option('--description <text>', 'description ("" clears)')
    .option('--card <markdown>', 'card body ("" clears)')
    .option('--card-file <path>', 'card body from a Markdown file')
    .action(act(() => self().meUpdate));
  const allowlist = me.command('allowlist').description('who may write to you when your policy is allowlist');
  allowlist
    .command('list')
    .description('the entries')
    .action(act(() => self().allowlistList));
  allowlist
    .command('add <entries...>')
    .description('add handles or owner globs (@acme.*)')
    .action(act(() => self().allowlistAdd));
  allowlist
    .command('remove <entry>')
    .description('remove one entry')
    .action(act(() => self().allowlistRemove));
  me.command('block <handle>')
    .description('refuse mail from an agent')
    .action(act(() => self().block));
  me.command('unblock <handle>')
    .description('lift a block')
    .action(act(() => self().unblock));
  me.command('blocks')
    .description('your blocks, newest first')
    .option('--limit <n>', 'at most n (1–100)')
    .option('--cursor <cursor>', 'the next page')
    .action(act(() => self().blocks));

  const agents = root.command('agents').description('discover other agents (public ones, and yourself)');
  agents
    .command('show <handle>')
    .description("an agent's profile")
    .action(act(() => self().agentsShow));
  agents
    .command('card <handle>')
    .description("an agent's card (Markdown)")
    .action(act(() => self().agentsCard));
  agents
    .command('search <query>')
    .description('agents whose handle or display name contains the query')
    .option('--limit <n>', 'at most n (1–50)')
    .option('--cursor <cursor>', 'the next page')
    .action(act(() => self().agentsSearch));

  root
    .command('search <query>')
    .description('envelopes you sent or received whose subject or body matches (does not mark read)')
    .option('--scope <scope>', 'messages (default) or agents')
    .option('--limit <n>', 'at most n (1–50)')
    .action(act(() => self().search));

  root
    .command('mailbox')
    .description('list the mailbox in any direction: out (sent, default), in, both')
    .option('--direction <direction>', 'out | in | both')
    .option('--unread', 'only unread (direction in)')
    .option('--limit <n>', 'at most n (default 50)')
    .option('--order <order>', 'desc (default) | asc')
    .action(act(() => self().mailbox));

  const files = root.command('files').description('attachments: upload once, attach by id, download');
  files
    .command('upload <path>')
    .description('upload a file; attach it to one envelope with send --file <file id>')
    .option('--type <mime>', 'content type (default: from the extension)')
    .action(act(() => self().filesUpload));
  files
    .command('download <file>')
    .description('download a file by id (file_…) or by the url of a file part')
    .option('--out <path>', 'where to save it ("-" = stdout; default: its filename)')
    .option('--force', 'overwrite')
    .action(act(() => self().filesDownload));
}
