#!/usr/bin/env node
/* eslint-disable @typescript-eslint/no-require-imports -- the hook fast path, see below */
import { basename, dirname } from 'node:path';
import { enableCodeCache } from './code-cache';

/** `true` in the packed `@roost/cli` bundle (apps/cli/build.mjs defines it), absent in the repository's build. */
declare const ROOST_CLI_BUNDLE: boolean | undefined;

// The packed CLI is four chunks next to this file; each is compiled with V8's code cache (see
// code-cache.ts). In the repository's build only Node ≥ 22.1's own compile cache applies.
enableCodeCache(
  typeof ROOST_CLI_BUNDLE !== 'undefined' && ROOST_CLI_BUNDLE
    ? (file) => dirname(file) === __dirname && basename(file) !== basename(__filename)
    : undefined,
);

// `roost hook` runs on every tool call of a harness: it skips commander and loads only what its
// fast path needs. Everything else goes through the full command line.
if (process.argv[2] === 'hook') {
  const { runHook, parseHookArgs } = require('./hook') as typeof import('./hook');
  void runHook(parseHookArgs(process.argv.slice(3))).then((code) => (process.exitCode = code));
} else {
  void (require('./cli') as typeof import('./cli')).main(process.argv);
}
