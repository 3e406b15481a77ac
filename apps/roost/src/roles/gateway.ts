// `nest start gateway`: the one entry point (../main) running the gateway role alone.
process.env.ROOST_ROLE = 'gateway';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- after ROOST_ROLE is set: an import would be hoisted above it
require('../main');
