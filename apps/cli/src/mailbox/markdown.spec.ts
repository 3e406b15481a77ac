import { blockKeys, fence, splitBlocks } from './markdown';

describe('mailbox Markdown blocks', () => {
  it('splits on H2 headings only, reading metadata lines then the exact body', () => {
    const text =
      '# Outbox\n\nintro ignored\n\n## reply 01ABC\nsubject: Hi there\ncc: @a.b\n\nBody line.\n\n- item\n\n### a sub heading stays in the body\n\n## to @a.b\n\nsecond\n';
    const blocks = splitBlocks(text, ['subject', 'cc']);
    expect(blocks.map((b) => [b.heading, b.line])).toEqual([
      ['reply 01ABC', 5],
      ['to @a.b', 15],
    ]);
    expect(blocks[0].meta).toEqual({ subject: 'Hi there', cc: '@a.b' });
    expect(blocks[0].body).toBe('Body line.\n\n- item\n\n### a sub heading stays in the body');
    expect(blocks[1].body).toBe('second');
  });

  it('treats a first paragraph as body unless every line is a known key', () => {
    const [block] = splitBlocks('## to @a.b\n\nNote: this is prose\nnot metadata\n', ['subject']);
    expect(block.meta).toEqual({});
    expect(block.body).toBe('Note: this is prose\nnot metadata');
  });

  it('never splits inside a fence, whatever the body holds', () => {
    const body = 'text\n\n## not a heading\n\n```js\nx()\n```';
    const text = `## 01ABC\n\nfrom: @a.b\n\n${fence(body)}\n\n## 01DEF\n\nfrom: @c.d\n\n${fence('y')}\n`;
    const blocks = splitBlocks(text, ['from']);
    expect(blocks.map((b) => b.heading)).toEqual(['01ABC', '01DEF']);
    expect(blocks[0].code).toBe(body);
    expect(fence(body).startsWith('````text\n')).toBe(true);
  });

  it('keys identical blocks by content and occurrence', () => {
    const blocks = splitBlocks('## to @a.b\n\nsame\n\n## to @a.b\n\nsame\n\n## to @a.b\n\nother\n', []);
    const keys = blockKeys(blocks);
    expect(keys[0].split('#')[0]).toBe(keys[1].split('#')[0]);
    expect(new Set(keys).size).toBe(3);
    expect(blockKeys(splitBlocks('## to @a.b\n\nsame\n', []))[0]).toBe(keys[0]);
  });
});
