import { AsmtpError, parseQueryString } from '#domain';
import { parseAgentListQuery } from './console-query';

const parse = (query: string) => parseAgentListQuery(parseQueryString(query));
const code = (query: string) => {
  try {
    parse(query);
    return 'ok';
  } catch (error) {
    return error instanceof AsmtpError ? `${error.status} ${error.code}` : 'other';
  }
};

describe('parseAgentListQuery', () => {
  it('keeps the reference listing when no console parameter is given', () => {
    expect(parse('')).toBeNull();
    expect(parse('other=1')).toBeNull();
  });

  it('reads q, limit, after and include=unread, with limit 50 by default', () => {
    expect(parse('q=Bot')).toEqual({ q: 'Bot', limit: 50, unread: false });
    expect(parse('limit=200&after=%40acme.bob&include=unread')).toEqual({
      limit: 200,
      after: '@acme.bob',
      unread: true,
    });
    expect(parse('q=&limit=1')).toEqual({ limit: 1, unread: false });
    expect(parse('include=unread')).toEqual({ limit: 50, unread: true });
    expect(parse('limit=&after=&include=')).toEqual({ limit: 50, unread: false });
  });

  it('refuses a bad limit, a non-handle after, an unknown include and a control character in q', () => {
    for (const query of [
      'limit=0',
      'limit=201',
      'limit=01',
      'limit=x',
      'after=bob',
      'include=all',
      'q=a%00b',
      `q=${'a'.repeat(101)}`,
    ]) {
      expect([query, code(query)]).toEqual([query, '400 INVALID_QUERY']);
    }
  });
});
