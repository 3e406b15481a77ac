#!/usr/bin/env node
import { FAULTS, Proxy, type Fault } from './proxy';

/**
 * node dist/conformance/src/tools/proxy-main.js --api <url> [--api <url>…] [--gateway <url>…] [--port N] [--fault <name>…]
 *
 * A round-robin loopback proxy in front of an operator; with --fault it turns the operator into a
 * deliberately broken one (docs/conformance.md, "Showing that the suite fails").
 */
async function main(): Promise<void> {
  const apis: string[] = [];
  const gateways: string[] = [];
  const faults: Fault[] = [];
  let port = 0;
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1];
    switch (argv[i]) {
      case '--api':
        apis.push(value);
        i++;
        break;
      case '--gateway':
        gateways.push(value);
        i++;
        break;
      case '--port':
        port = Number(value);
        i++;
        break;
      case '--fault':
        if (!(value in FAULTS)) throw new Error(`unknown fault ${value}; known: ${Object.keys(FAULTS).join(', ')}`);
        faults.push(value as Fault);
        i++;
        break;
      default:
        throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  const proxy = await Proxy.start({ apis, gateways: gateways.length > 0 ? gateways : apis, port, faults });
  process.stdout.write(
    `proxy listening on ${proxy.url} → api ${apis.join(', ')}; faults: ${faults.join(', ') || 'none'}\n`,
  );
  const stop = () => void proxy.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`proxy: ${(error as Error).message}\n`);
  process.exit(2);
});
