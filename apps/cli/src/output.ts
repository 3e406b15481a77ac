import { RoostError } from '#client';
import { ConfigFileError } from './config';

/**
 * Exit codes (documented in docs/cli.md): a script or a model tells "fix your config" from "the
 * operator is down" from "the operator said no" without parsing messages.
 */
export const EXIT = {
  OK: 0,
  FAILURE: 1,
  USAGE: 2,
  CONFIG: 3,
  UNAUTHORIZED: 4,
  NOT_FOUND: 5,
  UNREACHABLE: 6,
  REJECTED: 7,
  SERVER: 8,
  REVOKED: 9,
} as const;

/** A failure with the exit code it maps to and a hint saying what to do. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly hint?: string,
    readonly code = 'CLI_ERROR',
  ) {
    super(message);
  }
}

export interface Printer {
  json: boolean;
  /** Human text on stdout, or the JSON value as one line. */
  out(human: string | (() => string), value: unknown): void;
  /** Diagnostics: always stderr. */
  note(text: string): void;
}

export function printer(json: boolean): Printer {
  return {
    json,
    out(human, value) {
      if (json) process.stdout.write(`${JSON.stringify(value)}\n`);
      else {
        const text = typeof human === 'function' ? human() : human;
        if (text !== '') process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
      }
    },
    note(text) {
      process.stderr.write(`${text}\n`);
    },
  };
}

export interface ErrorContext {
  url?: string;
  agent?: string;
  profile?: string;
  admin?: boolean;
}

/** Map any failure to a CliError with an exit code and a hint. */
export function toCliError(error: unknown, where: ErrorContext = {}): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof ConfigFileError) {
    return new CliError(error.message, EXIT.CONFIG, `fix or delete ${error.file}`, 'BAD_CONFIG');
  }
  if (error instanceof RoostError) {
    if (error.kind === 'unreachable' || error.kind === 'timeout') {
      return new CliError(
        error.message,
        EXIT.UNREACHABLE,
        'is the operator running? Start one with `roost serve`, or point the CLI at it with --url, ROOST_URL or `roost config profile <name> --url <url>`',
        error.code,
      );
    }
    if (error.kind === 'protocol') return new CliError(error.message, EXIT.FAILURE, undefined, 'PROTOCOL');
    if (error.status === 401) {
      const hint = where.admin
        ? 'the admin token was refused: pass --admin-token, set ROOST_ADMIN_TOKEN, or store it with `roost config admin-token` (the embedded operator keeps it in .roost/admin-token)'
        : `the token for ${where.agent ?? 'this agent'} was refused (rotated or the agent was removed): get a new one with \`roost admin agent rotate-token ${where.agent ?? '<handle>'}\`, or pass --token`;
      return new CliError(`unauthorized: ${error.message}`, EXIT.UNAUTHORIZED, hint, error.code);
    }
    if (error.status === 404) {
      return new CliError(
        `not found: ${error.message}`,
        EXIT.NOT_FOUND,
        'check the handle or id; an unknown recipient and one whose policy does not admit you look the same (ASMTP non-enumeration)',
        error.code,
      );
    }
    if (error.status >= 500)
      return new CliError(
        `operator error ${error.status} ${error.code}: ${error.message}`,
        EXIT.SERVER,
        'retry later; the operator logs say more',
        error.code,
      );
    const hint =
      error.code === 'CONTENT_BLOCKED'
        ? `the content guard blocked it (${JSON.stringify(error.details.warnings ?? [])}); remove the content, or override with --allow-warnings <codes>`
        : error.code === 'RATE_LIMITED'
          ? `rate limited; retry in ${typeof error.details.retry_after_s === 'number' ? error.details.retry_after_s : 'a few'} s`
          : undefined;
    return new CliError(`refused (${error.status} ${error.code}): ${error.message}`, EXIT.REJECTED, hint, error.code);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(message, EXIT.FAILURE, undefined, 'FAILURE');
}

/** Print the error (JSON on stderr with --json) and exit with its code. */
export function die(error: unknown, json: boolean, where: ErrorContext = {}): never {
  const failure = toCliError(error, where);
  if (json) {
    process.stderr.write(
      `${JSON.stringify({ error: { code: failure.code, message: failure.message, hint: failure.hint, exit: failure.exitCode } })}\n`,
    );
  } else {
    process.stderr.write(`roost: ${failure.message}\n${failure.hint ? `  hint: ${failure.hint}\n` : ''}`);
  }
  process.exit(failure.exitCode);
}
