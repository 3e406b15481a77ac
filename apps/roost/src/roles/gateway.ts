// `nest start gateway`: the one entry point (../main) running the gateway role alone.
process.env.ROOST_ROLE = 'gateway';
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('../main');
