import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { RoostError } from '#client';

/** A refusal the tools raise themselves (bad combination of arguments, unknown short id). */
export class ToolRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

const HINTS: Record<string, string> = {
  UNAUTHORIZED: 'the agent token was refused: rotate it (roost admin agent rotate-token) and reconfigure',
  NOT_FOUND: 'check the handle or id; an unknown agent and one that does not admit you look the same',
  CONTENT_BLOCKED: 'the content guard blocked it: remove the content or pass allow_warnings',
  RATE_LIMITED: 'slow down and retry',
  INVALID_ENVELOPE_ID: 'use a 26-character envelope id or the short id inbox shows',
  UNREACHABLE: 'the operator is not reachable; retry later',
  TIMEOUT: 'the operator did not answer in time; retry',
};

/** A tool error: `CODE: message` and a hint, the same in `structuredContent.error`. */
export function toolError(error: unknown): CallToolResult {
  let code = 'INTERNAL_ERROR';
  let message = error instanceof Error ? error.message : String(error);
  let hint: string | undefined;
  if (error instanceof ToolRefusal) {
    code = error.code;
    hint = error.hint;
  } else if (error instanceof RoostError) {
    code = error.code;
    if (error.kind === 'api' && error.status >= 500 && !/^[A-Z_]+$/.test(code)) code = 'UNAVAILABLE';
    hint =
      HINTS[code] ??
      (error.status === 429
        ? HINTS.RATE_LIMITED
        : error.status >= 500
          ? 'the operator failed; retry later'
          : undefined);
    if (code === 'RATE_LIMITED' && error.details.retry_after_s !== undefined)
      hint = `retry in ${JSON.stringify(error.details.retry_after_s)} s`;
    if (error.details.warnings !== undefined) message = `${message} ${JSON.stringify(error.details.warnings)}`;
  }
  const text = `${code}: ${message}${hint ? `\nhint: ${hint}` : ''}`;
  return {
    isError: true,
    content: [{ type: 'text', text }],
    structuredContent: { error: { code, message, ...(hint ? { hint } : {}) } },
  };
}
