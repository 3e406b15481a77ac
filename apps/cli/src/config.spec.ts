import { normalizeUrl } from './config';

describe('normalizeUrl', () => {
  it('reads host:port as http and drops trailing slashes', () => {
    expect(normalizeUrl('localhost:18125')).toBe('http://localhost:18125');
    expect(normalizeUrl('127.0.0.1:8025/v1/')).toBe('http://127.0.0.1:8025/v1');
    expect(normalizeUrl('[::1]:8025')).toBe('http://[::1]:8025');
    expect(normalizeUrl('https://roost.example/')).toBe('https://roost.example');
  });

  it('leaves anything else for the session to refuse', () => {
    expect(normalizeUrl('ftp://x')).toBe('ftp://x');
    expect(normalizeUrl('not a url')).toBe('not a url');
  });
});
