import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ALLOWLIST_ENTRY_PATTERN as DOMAIN_ALLOWLIST, HANDLE_PATTERN as DOMAIN_HANDLE } from '../../domain/src/handles';
import { ALLOWLIST_ENTRY_PATTERN, handleProblem, HANDLE_PATTERN, isHandle } from './handles';

describe('SDK handle grammar', () => {
  it('is the grammar the operator validates with (wire schema and domain)', () => {
    const common = JSON.parse(readFileSync(join(__dirname, '../../schemas/wire/common.schema.json'), 'utf8'));
    expect(HANDLE_PATTERN).toBe(common.$defs.handle.pattern);
    expect(ALLOWLIST_ENTRY_PATTERN).toBe(common.$defs.allowlistEntry.pattern);
    expect(HANDLE_PATTERN).toBe(DOMAIN_HANDLE);
    expect(ALLOWLIST_ENTRY_PATTERN).toBe(DOMAIN_ALLOWLIST);
  });

  it('accepts handles and refuses the rest, suggesting the obvious spelling', () => {
    expect(isHandle('@acme.bob')).toBe(true);
    for (const bad of ['bob', '@Acme.Bob', 'acme.bob', '@acme', '@acme.b.c', '@acme.*'])
      expect(isHandle(bad)).toBe(false);
    expect(handleProblem('@acme.bob')).toBeNull();
    expect(handleProblem('@Acme.Bob')).toMatchObject({
      suggestion: '@acme.bob',
      message: expect.stringContaining('@<owner>.<name>'),
    });
    expect(handleProblem('acme.bob')?.suggestion).toBe('@acme.bob');
    expect(handleProblem('bob')?.suggestion).toBeUndefined();
  });
});
