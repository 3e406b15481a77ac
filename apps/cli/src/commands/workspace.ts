import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Listener, MemoryCursorStore, triageLine } from '#client';
import { writeJsonAtomic } from '../config';
import {
  addCodexMcp,
  addHooks,
  addMcpJson,
  applyBlock,
  applyGitignore,
  formatJson,
  jsonEqual,
  managedBlock,
  removeBlock,
  removeCodexMcp,
  removeGitignore,
  removeHooks,
  removeMcpJson,
  selfCommand,
  shellSplit,
  type BaseCommand,
} from '../install';
import {
  loadState,
  mailboxPaths,
  mirrorOnce,
  OUTBOX_TEMPLATE,
  RECEIPTS_TEMPLATE,
  type MirrorResult,
} from '../mailbox/mirror';
import { CliError, EXIT } from '../output';
import { USER_AGENT, type Session } from '../session';

// --- mirror ----------------------------------------------------------------------------------

function describe(result: MirrorResult): string[] {
  const lines: string[] = [];
  for (const header of result.appended) lines.push(`new ${triageLine(header)}`);
  for (const sent of result.sent)
    lines.push(
      `sent ${sent.id}${sent.in_reply_to ? ` (reply to ${sent.in_reply_to})` : ''} to ${sent.to.join(', ')} (OUTBOX.md:${sent.line})`,
    );
  for (const receipt of result.receipts)
    lines.push(`receipt ${receipt.status} for ${receipt.envelope_id} (RECEIPTS.md:${receipt.line})`);
  return lines;
}

function reportProblems(session: Session, result: MirrorResult): void {
  for (const p of result.problems)
    session.print.note(`roost mirror: skipped ${p.file}:${p.line} "## ${p.heading}": ${p.reason}`);
}

export async function mirror(
  session: Session,
  options: { once?: boolean; dir?: string; interval?: string },
): Promise<void> {
  const root = resolve(options.dir ?? session.ctx.root ?? process.cwd());
  const agent = session.requireAgent();
  const client = session.client();
  const once = async () => {
    const result = await mirrorOnce(client, root, agent);
    reportProblems(session, result);
    session.print.out(() => describe(result).join('\n'), result);
    return result;
  };
  if (options.once) {
    await once();
    return;
  }
  const paths = mailboxPaths(root);
  let running = false;
  let again = false;
  const pass = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        await once();
      } while (again);
    } catch (error) {
      session.print.note(`roost mirror: ${(error as Error).message} (will retry)`);
    } finally {
      running = false;
    }
  };
  const signature = () =>
    [paths.outbox, paths.receipts]
      .map((f) => (existsSync(f) ? `${statSync(f).size}:${statSync(f).mtimeMs}` : '-'))
      .join('|');
  let last = signature();
  await pass();
  const intervalMs = Number(options.interval ?? 1000);
  const poll = setInterval(() => {
    const now = signature();
    if (now !== last) {
      last = now;
      void pass();
    }
  }, intervalMs);
  const periodic = setInterval(() => void pass(), 30_000);
  // Push is only the wake-up: the pass itself pages the mailbox from STATE.json's cursor.
  const listener = new Listener({
    url: session.ctx.url,
    token: session.requireToken(),
    cursor: new MemoryCursorStore(loadState(paths, agent).inbox.cursor),
    userAgent: USER_AGENT,
    onFrame: (frame) => {
      if (frame.op === 'envelope.notify') void pass();
    },
  }).start();
  await new Promise<void>((done) => {
    const stop = () => {
      clearInterval(poll);
      clearInterval(periodic);
      void listener.stop().then(done);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    void listener.done.then((end) => {
      if (end !== 'stopped') {
        session.print.note(`roost mirror: push stopped (${end}); exiting`);
        stop();
      }
    });
  });
}

// --- install / uninstall ---------------------------------------------------------------------

interface Manifest {
  version: 1;
  /** Relative path → text before install (null: the file did not exist). */
  files: Record<string, string | null>;
  /** Folders install created (removed again when empty). */
  dirs: string[];
}

const MANIFEST = join('.roost', 'install.json');

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function ensureDir(root: string, rel: string, manifest: Manifest): void {
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const sub = parts.slice(0, i).join('/');
    if (!existsSync(join(root, sub))) {
      mkdirSync(join(root, sub), { mode: 0o755 });
      if (!manifest.dirs.includes(sub)) manifest.dirs.push(sub);
    }
  }
}

function parseJsonFile(text: string | null, file: string): Record<string, unknown> {
  if (text === null || text.trim() === '') return {};
  try {
    const value = JSON.parse(text) as unknown;
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new CliError(
    `${file} is not a JSON object`,
    EXIT.CONFIG,
    `fix ${file} by hand, then rerun roost install`,
    'BAD_JSON',
  );
}

export function install(
  session: Session,
  options: { dir?: string; claude?: boolean; codex?: boolean; mcp?: boolean; command?: string },
): void {
  const root = resolve(options.dir ?? process.cwd());
  mkdirSync(root, { recursive: true });
  const manifestFile = join(root, MANIFEST);
  const manifest: Manifest = existsSync(manifestFile)
    ? (JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest)
    : { version: 1, files: {}, dirs: [] };
  const changed: string[] = [];
  const edit = (rel: string, next: (current: string | null) => string) => {
    const file = join(root, rel);
    const current = readText(file);
    if (!(rel in manifest.files)) manifest.files[rel] = current;
    const text = next(current);
    if (text !== current) {
      ensureDir(root, dirname(rel) === '.' ? '' : dirname(rel), manifest);
      writeFileSync(file, text);
      changed.push(rel);
    }
  };
  ensureDir(root, '.roost/mailbox', manifest);
  // Absolute node + main.js by default: a bare `roost` fails silently when the harness's PATH lacks it.
  let base: BaseCommand;
  try {
    base = options.command ? shellSplit(options.command) : selfCommand();
  } catch {
    base = [];
  }
  if (base.length === 0)
    throw new CliError(
      `--command ${JSON.stringify(options.command)} is not a command line`,
      EXIT.USAGE,
      'e.g. --command roost or --command "/usr/local/bin/roost"',
      'USAGE',
    );
  edit('.gitignore', (text) => applyGitignore(text ?? ''));
  const block = managedBlock(session.ctx.agent);
  edit('AGENTS.md', (text) => applyBlock(text ?? '', block));
  if (existsSync(join(root, 'CLAUDE.md'))) edit('CLAUDE.md', (text) => applyBlock(text ?? '', block));
  if (options.claude !== false)
    edit('.claude/settings.json', (text) =>
      formatJsonPreserving(text, addHooks(parseJsonFile(text, '.claude/settings.json'), base)),
    );
  if (options.codex !== false)
    edit('.codex/hooks.json', (text) =>
      formatJsonPreserving(text, addHooks(parseJsonFile(text, '.codex/hooks.json'), base)),
    );
  if (options.mcp) {
    // The MCP server beside the hooks: Claude Code reads .mcp.json, Codex its project config.toml.
    if (options.claude !== false)
      edit('.mcp.json', (text) =>
        formatJsonPreserving(text, addMcpJson(parseJsonFile(text, '.mcp.json'), session.ctx.agent, base)),
      );
    if (options.codex !== false) edit('.codex/config.toml', (text) => addCodexMcp(text ?? '', session.ctx.agent, base));
  }
  edit('.roost/mailbox/OUTBOX.md', (text) => text ?? OUTBOX_TEMPLATE);
  edit('.roost/mailbox/RECEIPTS.md', (text) => text ?? RECEIPTS_TEMPLATE);
  if (session.ctx.agent && !existsSync(join(root, '.roost', 'config.json'))) {
    edit('.roost/config.json', () =>
      formatJson({
        agent: session.ctx.agent,
        ...(session.ctx.profile !== 'default' ? { profile: session.ctx.profile } : {}),
      }),
    );
  }
  manifest.dirs = manifest.dirs.filter((d) => d !== '');
  writeJsonAtomic(manifestFile, manifest, 0o644);
  session.print.out(
    () => (changed.length ? `installed in ${root}: ${changed.join(', ')}` : `already installed in ${root}`),
    { root, changed },
  );
}

/** Keep the file's bytes when the JSON did not change. */
function formatJsonPreserving(current: string | null, value: unknown): string {
  if (current !== null && current.trim() !== '') {
    try {
      if (jsonEqual(JSON.parse(current), value)) return current;
    } catch {
      // rewritten below
    }
  }
  return formatJson(value);
}

export function uninstall(session: Session, options: { dir?: string }): void {
  const root = resolve(options.dir ?? process.cwd());
  const manifestFile = join(root, MANIFEST);
  if (!existsSync(manifestFile)) {
    session.print.out(`nothing installed in ${root}`, { root, changed: [] });
    return;
  }
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const changed: string[] = [];
  const kept: string[] = [];
  for (const [rel, original] of Object.entries(manifest.files)) {
    const file = join(root, rel);
    const current = readText(file);
    if (current === null) continue;
    let next: string | null;
    if (rel === '.codex/config.toml') {
      const removed = removeCodexMcp(current);
      next =
        original !== null && removed.trimEnd() === original.trimEnd()
          ? original
          : original === null && removed.trim() === ''
            ? null
            : removed;
    } else if (rel.endsWith('.json') && rel !== '.roost/config.json') {
      const removed = (rel === '.mcp.json' ? removeMcpJson : removeHooks)(parseJsonFile(current, rel));
      const before = original === null ? {} : parseJsonFile(original, rel);
      next = jsonEqual(removed, before)
        ? original
        : Object.keys(removed).length === 0 && original === null
          ? null
          : formatJson(removed);
    } else if (rel.endsWith('AGENTS.md') || rel.endsWith('CLAUDE.md') || rel === '.gitignore') {
      const removed = rel === '.gitignore' ? removeGitignore(current) : removeBlock(current);
      next =
        original !== null && removed.trimEnd() === original.trimEnd()
          ? original
          : original === null && removed.trim() === ''
            ? null
            : removed;
    } else {
      // Files install created from a template: removed only if untouched since.
      next =
        original === null &&
        (current === OUTBOX_TEMPLATE || current === RECEIPTS_TEMPLATE || rel === '.roost/config.json')
          ? null
          : current;
      if (next !== null && original === null) kept.push(rel);
    }
    if (next === null) {
      unlinkSync(file);
      changed.push(rel);
    } else if (next !== current) {
      writeFileSync(file, next);
      changed.push(rel);
    }
  }
  unlinkSync(manifestFile);
  // Cursors and locks the hooks and the mirror wrote: meaningless without the install, removed.
  for (const rel of ['.roost/hook.json', '.roost/mailbox/.lock']) {
    if (existsSync(join(root, rel))) {
      unlinkSync(join(root, rel));
      changed.push(rel);
    }
  }
  const leftBehind: Array<{ file: string; why: string }> = kept.map((file) => ({ file, why: 'edited since install' }));
  const why: Record<string, string> = {
    '.roost/mailbox/INBOX.md': 'mail received (bodies); delete it by hand when no longer needed',
    '.roost/mailbox/STATE.json': "the mailbox's cursor, kept with INBOX.md so a reinstall does not fetch it again",
    '.roost/admin-token': 'an admin token this tool did not write',
  };
  for (const [file, reason] of Object.entries(why))
    if (existsSync(join(root, file))) leftBehind.push({ file, why: reason });
  for (const dir of [...manifest.dirs].sort((a, b) => b.length - a.length)) {
    try {
      if (readdirSync(join(root, dir)).length === 0) rmdirSync(join(root, dir));
    } catch {
      // not empty or gone
    }
  }
  session.print.out(
    () =>
      `uninstalled from ${root}: ${changed.join(', ') || 'nothing to change'}` +
      leftBehind.map((l) => `\nleft behind: ${l.file} (${l.why})`).join(''),
    { root, changed, kept, left_behind: leftBehind },
  );
}
