import { apiBase, SseParser } from './api';

describe('SseParser', () => {
  const collect = (chunks: string[]) => {
    const events: Array<[string, string]> = [];
    const parser = new SseParser((event, data) => events.push([event, data]));
    for (const chunk of chunks) parser.push(chunk);
    return events;
  };

  it('yields header events split across chunks at any byte, skipping keepalive comments', () => {
    const stream =
      ': keepalive\n\nevent: header\ndata: {"id":"01A"}\n\n: keepalive\n\nevent: header\ndata: {"id":"01B"}\n\n';
    const expected = [
      ['header', '{"id":"01A"}'],
      ['header', '{"id":"01B"}'],
    ];
    expect(collect([stream])).toEqual(expected);
    for (let cut = 1; cut < stream.length; cut++)
      expect(collect([stream.slice(0, cut), stream.slice(cut)])).toEqual(expected);
  });

  it('accepts CRLF and CR line ends, joins multi-line data, defaults the event to message', () => {
    expect(collect(['event: header\r\ndata: a\r\ndata: b\r\n\r\n', 'data:c\r\r'])).toEqual([
      ['header', 'a\nb'],
      ['message', 'c'],
    ]);
  });

  it('holds an event back until its blank line arrives', () => {
    expect(collect(['event: header\ndata: {"id":"01A"}\n'])).toEqual([]);
  });
});

describe('apiBase', () => {
  it('is the prefix the console was loaded under', () => {
    expect(apiBase('/console/')).toBe('');
    expect(apiBase('/x/roost/console/')).toBe('/x/roost');
    expect(apiBase('/x/roost/console/agents/@acme.bot')).toBe('/x/roost');
    expect(apiBase('/console/agents/console')).toBe('');
    expect(apiBase('/')).toBe('');
  });
});
