#!/usr/bin/env node
/* eslint-disable @typescript-eslint/no-require-imports -- the hook fast path, see below */
// `roost hook` runs on every tool call of a harness: it skips commander and loads only what its
// fast path needs. Everything else goes through the full command line.
if (process.argv[2] === 'hook') {
  const { runHook, parseHookArgs } = require('./hook') as typeof import('./hook');
  void runHook(parseHookArgs(process.argv.slice(3))).then((code) => (process.exitCode = code));
} else {
  void (require('./cli') as typeof import('./cli')).main(process.argv);
}
