import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { RoostClient } from '#client';
import { createRoostMcpServer, jsonSchemaValidatorOnDemand, LazyJsonSchemaValidator } from './server';

// js-tiktoken's CommonJS build, as in bench/triage.ts.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the CommonJS build, see above
const { getEncoding } = require('js-tiktoken') as {
  getEncoding: (name: 'o200k_base' | 'cl100k_base') => { encode(text: string): number[] };
};

async function listed() {
  const server = createRoostMcpServer({
    client: new RoostClient({ url: 'http://127.0.0.1:1', token: 't' }),
    agent: '@a.b',
    watch: { wait: async () => false },
    maxWaitMs: 1,
  });
  const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'spec', version: '1' });
  await client.connect(clientSide);
  const { tools } = await client.listTools();
  await client.close();
  return tools;
}

describe('the MCP tool list', () => {
  it('stays within 1,200 tokens as tools/list returns it (o200k_base and cl100k_base)', async () => {
    const text = JSON.stringify({ tools: await listed() });
    for (const encoding of ['o200k_base', 'cl100k_base'] as const)
      expect(getEncoding(encoding).encode(text).length).toBeLessThanOrEqual(1200);
  });

  it('lists every tool of EXTENSIONS.md §8 with compact schemas (no $schema, no safe-integer bounds)', async () => {
    const tools = await listed();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'agents',
      'inbox',
      'mark_read',
      'read',
      'receipt',
      'reply',
      'schedule',
      'search',
      'send',
      'status',
      'wait_for_mail',
    ]);
    const text = JSON.stringify(tools);
    expect(text).not.toContain('$schema');
    expect(text).not.toContain(String(Number.MAX_SAFE_INTEGER));
    expect(tools.find((t) => t.name === 'send')!.inputSchema.required).toEqual(['to']);
  });
});

describe('start-up', () => {
  it('answers initialize and tools/list without building ajv (only elicitation answers need it)', async () => {
    expect((await listed()).length).toBe(11);
    expect(jsonSchemaValidatorOnDemand.built).toBe(false);
  });

  it('builds ajv on first use and validates with it', () => {
    const validator = new LazyJsonSchemaValidator();
    expect(validator.built).toBe(false);
    const check = validator.getValidator<{ a: string }>({
      type: 'object',
      properties: { a: { type: 'string' } },
      required: ['a'],
    });
    expect(validator.built).toBe(true);
    expect(check({}).valid).toBe(false);
    expect(check({ a: 'x' })).toEqual({ valid: true, data: { a: 'x' }, errorMessage: undefined });
  });
});
