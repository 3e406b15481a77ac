import { createHash } from 'node:crypto';
import { Lexer, type Token, type Tokens } from 'marked';

/**
 * The worktree mailbox files are Markdown read through marked's lexer (an AST of block tokens), never
 * split on strings: a `## ` inside a fenced body is code, not a new block. Every file is a sequence
 * of H2 blocks; whatever precedes the first H2 (a title, notes) is ignored.
 *
 *   ## <heading>          the block's key: an envelope id, `reply <id>`, `to @a.b …`
 *   key: value            optional metadata: the first paragraph, every line `known-key: value`
 *   key: value
 *
 *   body                  the rest, up to the next H2 (INBOX.md fences it so it can hold anything)
 */

export interface RawBlock {
  heading: string;
  /** 1-based line of the heading. */
  line: number;
  meta: Record<string, string>;
  /** Markdown source of the body (trimmed); for a single fenced block, see `code`. */
  body: string;
  /** When the body is exactly one fenced code block: its content. */
  code: string | undefined;
  /** The block's source text, heading included (what identifies it). */
  raw: string;
}

export interface Malformed {
  line: number;
  heading: string;
  reason: string;
  /** Stable identity of the bad block, so it is reported once. */
  key: string;
}

const META_LINE = /^([a-z_]+):[ \t]*(.*)$/;

/** Split `source` into H2 blocks; metadata is recognised only for `metaKeys`. */
export function splitBlocks(source: string, metaKeys: readonly string[]): RawBlock[] {
  const tokens = Lexer.lex(source);
  const blocks: RawBlock[] = [];
  let offset = 0;
  let current: { heading: string; line: number; start: number; tokens: Token[] } | undefined;
  const close = (end: number) => {
    if (!current) return;
    blocks.push(buildBlock(current.heading, current.line, source.slice(current.start, end), current.tokens, metaKeys));
  };
  for (const token of tokens) {
    if (token.type === 'heading' && (token as Tokens.Heading).depth === 2) {
      close(offset);
      current = {
        heading: (token as Tokens.Heading).text.trim(),
        line: lineAt(source, offset),
        start: offset,
        tokens: [],
      };
    } else if (current) {
      current.tokens.push(token);
    }
    offset += token.raw.length;
  }
  close(source.length);
  return blocks;
}

function lineAt(source: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset; i++) if (source.charCodeAt(i) === 10) line++;
  return line;
}

function buildBlock(
  heading: string,
  line: number,
  raw: string,
  tokens: Token[],
  metaKeys: readonly string[],
): RawBlock {
  // Offsets inside the block: the body is the exact source after the heading and metadata.
  let offset = raw.length - tokens.reduce((sum, t) => sum + t.raw.length, 0);
  let index = 0;
  while (tokens[index]?.type === 'space') offset += tokens[index++].raw.length;
  const meta: Record<string, string> = {};
  const first = tokens[index];
  if (first?.type === 'paragraph') {
    const lines = (first as Tokens.Paragraph).raw.trim().split('\n');
    const parsed = lines.map((l) => META_LINE.exec(l.trim()));
    if (parsed.every((m) => m !== null && metaKeys.includes(m[1]))) {
      for (const m of parsed) meta[m![1]] = m![2].trim();
      offset += first.raw.length;
      index++;
    }
  }
  const rest = tokens.slice(index).filter((t) => t.type !== 'space');
  const body = raw.slice(offset).trim();
  const code = rest.length === 1 && rest[0].type === 'code' ? (rest[0] as Tokens.Code).text : undefined;
  return { heading, line, meta, body, code, raw };
}

/**
 * Stable identity of an agent-written block: its normalised text plus how many identical blocks
 * came before it, so two identical replies are two sends and an edit elsewhere moves nothing.
 */
export function blockKeys(blocks: RawBlock[]): string[] {
  const seen = new Map<string, number>();
  return blocks.map((block) => {
    const digest = createHash('sha256')
      .update(block.raw.replace(/\s+$/g, '').replace(/\r\n/g, '\n'))
      .digest('hex')
      .slice(0, 32);
    const n = (seen.get(digest) ?? 0) + 1;
    seen.set(digest, n);
    return `${digest}#${n}`;
  });
}

/** A fence longer than any backtick run in `text`, so the body can never end the block early. */
export function fence(text: string, info = 'text'): string {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const ticks = '`'.repeat(Math.max(3, longest + 1));
  return `${ticks}${info}\n${text}${text.endsWith('\n') ? '' : '\n'}${ticks}`;
}

/** Metadata values are one line. */
export const oneLine = (value: string) => value.replace(/[\r\n]+/g, ' ').trim();
