import type { ContentPart, StoredEnvelope } from './types';

/** Human rendering of bodies, shared by `roost show` and the worktree mailbox. */

export function partText(part: ContentPart): string {
  switch (part.type) {
    case 'text':
      return part.text;
    case 'data':
      return `[data${part.schema ? ` ${String(part.schema)}` : ''}] ${JSON.stringify(part.data)}`;
    case 'file':
      return `[file ${String(part.name ?? '')}] ${String(part.url ?? part.file_id ?? '')}`.replace('[file ]', '[file]');
    case 'image':
      return `[image] ${String(part.url ?? part.file_id ?? '')}`;
    default:
      return `[${String((part as { type?: unknown }).type)}] ${JSON.stringify(part)}`;
  }
}

export function bodyText(envelope: StoredEnvelope): string {
  return envelope.content_parts.map(partText).join('\n\n');
}

export function renderEnvelope(envelope: StoredEnvelope): string {
  const lines = [`id: ${envelope.id}`, `from: ${envelope.from}`, `to: ${envelope.to.join(', ')}`];
  if (envelope.cc) lines.push(`cc: ${envelope.cc.join(', ')}`);
  if (envelope.subject !== undefined) lines.push(`subject: ${envelope.subject}`);
  lines.push(`date: ${new Date(envelope.date_ms).toISOString()}`);
  if (envelope.in_reply_to) lines.push(`in_reply_to: ${envelope.in_reply_to}`);
  return `${lines.join('\n')}\n\n${bodyText(envelope)}\n`;
}
