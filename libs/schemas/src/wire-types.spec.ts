import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

describe('wire.generated.ts (the schemas as types for FromSchema)', () => {
  it('is what scripts/wire-types.mjs makes of libs/schemas/wire today', () => {
    // --check exits 1 naming the file when a schema changed and `npm run schemas:types` was not run.
    const root = join(__dirname, '../../..');
    expect(() =>
      execFileSync(process.execPath, [join(root, 'scripts/wire-types.mjs'), '--check'], { stdio: 'pipe' }),
    ).not.toThrow();
  });
});
