import { BlockList, isIP } from 'node:net';
import type { Cidr } from '#config';

/** `::ffff:10.1.2.3` (an IPv4 peer on a dual-stack socket) is `10.1.2.3`. */
const plain = (address: string): string =>
  address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;

/**
 * The client address a request's limits are keyed by (EXTENSIONS.md §7): the TCP peer, or, when the
 * peer is a trusted proxy (`ROOST_TRUSTED_PROXIES`), the right-most `X-Forwarded-For` hop that is
 * not itself a trusted proxy. Hops left of it were written by the client and prove nothing.
 */
export class ClientAddresses {
  private readonly trusted: BlockList | undefined;

  constructor(proxies: readonly Cidr[]) {
    if (proxies.length === 0) return;
    this.trusted = new BlockList();
    for (const { address, prefix, family } of proxies) this.trusted.addSubnet(address, prefix, family);
  }

  of(peer: string | undefined, forwardedFor: string | string[] | undefined): string {
    let address = plain(peer ?? 'unknown');
    if (!this.isTrusted(address) || forwardedFor === undefined) return address;
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = plain(hops[i].trim());
      // A malformed hop: the last address a trusted proxy vouched for is all that is known.
      if (isIP(hop) === 0) return address;
      address = hop;
      if (!this.isTrusted(hop)) return hop;
    }
    return address;
  }

  private isTrusted(address: string): boolean {
    const family = isIP(address);
    return this.trusted !== undefined && family !== 0 && this.trusted.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}
