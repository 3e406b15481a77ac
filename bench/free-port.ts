import { createServer } from 'node:net';

/** Every port this process has handed out (see `freePort`). */
const given = new Set<number>();

/** A port the kernel picks for a listener on 127.0.0.1 (bound, read, released). */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, and that this process has not handed out
 * before. The kernel may pick a port it just released again: a chaos run took ports for all six
 * nodes before starting any, got the same one twice, and one node failed with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await kernelPort();
    if (!given.has(port)) {
      given.add(port);
      return port;
    }
  }
}
