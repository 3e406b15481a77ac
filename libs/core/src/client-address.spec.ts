import { loadConfig } from '#config';
import { ClientAddresses } from './client-address';

const addresses = (proxies: string) =>
  new ClientAddresses(loadConfig({ ROOST_TRUSTED_PROXIES: proxies }).trustedProxies);

describe('ClientAddresses: X-Forwarded-For only from trusted proxies', () => {
  it('with no trusted proxy the TCP peer is the client, whatever the header says', () => {
    expect(addresses('').of('198.51.100.9', '203.0.113.1')).toBe('198.51.100.9');
  });

  it('a peer outside the trusted blocks cannot choose its address', () => {
    expect(addresses('10.0.0.0/8').of('198.51.100.9', '203.0.113.1')).toBe('198.51.100.9');
  });

  it('from a trusted proxy, the right-most hop that is not a trusted proxy', () => {
    const trusted = addresses('10.0.0.0/8, fd00::/8');
    expect(trusted.of('10.0.0.5', '203.0.113.1')).toBe('203.0.113.1');
    // The client wrote 1.2.3.4 itself; the ingress (10.0.0.7) appended the address it saw.
    expect(trusted.of('10.0.0.5', ['1.2.3.4, 203.0.113.1', '10.0.0.7'])).toBe('203.0.113.1');
    expect(trusted.of('fd00::2', '2001:db8::1')).toBe('2001:db8::1');
  });

  it('all hops trusted: the left-most; a malformed hop: the last address a proxy vouched for', () => {
    const trusted = addresses('10.0.0.0/8');
    expect(trusted.of('10.0.0.5', '10.0.0.9, 10.0.0.8')).toBe('10.0.0.9');
    expect(trusted.of('10.0.0.5', 'junk, 10.0.0.8')).toBe('10.0.0.8');
    expect(trusted.of('10.0.0.5', undefined)).toBe('10.0.0.5');
  });

  it('an IPv4 peer on a dual-stack socket matches IPv4 blocks', () => {
    expect(addresses('127.0.0.1').of('::ffff:127.0.0.1', '203.0.113.1')).toBe('203.0.113.1');
    expect(addresses('').of('::ffff:127.0.0.1', undefined)).toBe('127.0.0.1');
  });
});
