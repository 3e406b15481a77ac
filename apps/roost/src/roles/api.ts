// `nest start api`: the one entry point (../main) running the api role alone.
process.env.ROOST_ROLE = 'api';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- after ROOST_ROLE is set: an import would be hoisted above it
require('../main');
