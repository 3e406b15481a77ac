// `nest start worker`: the one entry point (../main) running the worker role alone.
process.env.ROOST_ROLE = 'worker';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- after ROOST_ROLE is set: an import would be hoisted above it
require('../main');
