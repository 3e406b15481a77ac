import { acceptEmbeddedDbScenario, acceptScenario } from './accept';
import { acceptFloorScenario } from './accept-floor';
import { acceptPairedScenario } from './accept-paired';
import { acceptStatementScenario } from './accept-statement';
import { catchupScenario } from './catchup';
import { cliScenario } from './cli';
import { consoleSearchScenario } from './console-search';
import { connectionsScenario, idleSocketsScenario } from './connections';
import { consoleScenario } from './console';
import { fanoutScenario } from './fanout';
import { firstSendScenario } from './first-send';
import { guardCorpusScenario, guardScenario } from './guard';
import { mcpScenario } from './mcp';
import { preparedScenario } from './prepared';
import { purgeScenario } from './purge';
import { pushScenario } from './push';
import { triageScenario } from './triage';

/** `npm run bench -- <scenario>`: each scenario prints one JSON line with its figures. */
const SCENARIOS: Record<string, () => Promise<Record<string, unknown> | Array<Record<string, unknown>>>> = {
  accept: () => acceptScenario({ label: 'accept' }),
  'accept-http': () => acceptScenario({ client: 'node-http', label: 'accept-http' }),
  'accept-spread': () => acceptScenario({ inboxes: 32, label: 'accept-spread' }),
  'accept-split': () => acceptScenario({ split: true, label: 'accept-split' }),
  'accept-split-http': () => acceptScenario({ split: true, client: 'node-http', label: 'accept-split-http' }),
  'accept-embedded': () => acceptScenario({ mode: 'embedded', label: 'accept-embedded' }),
  'accept-embedded-http': () =>
    acceptScenario({ mode: 'embedded', client: 'node-http', label: 'accept-embedded-http' }),
  'accept-floor': () => acceptFloorScenario(),
  'accept-paired': () => acceptPairedScenario(),
  'accept-statement': () => acceptStatementScenario(),
  'accept-embedded-db': () => acceptEmbeddedDbScenario(),
  catchup: () => catchupScenario(),
  triage: () => triageScenario(),
  cli: () => cliScenario(),
  guard: () => guardScenario(),
  'guard-corpus': () => guardCorpusScenario(),
  prepared: () => preparedScenario(),
  purge: () => purgeScenario(),
  push: () => pushScenario(),
  'push-all': () => pushScenario('all'),
  'push-embedded': () => pushScenario('embedded'),
  fanout: () => fanoutScenario(),
  'fanout-all': () => fanoutScenario('all'),
  'first-send': () => firstSendScenario(),
  'idle-sockets-all': () => idleSocketsScenario(),
  connections: () => connectionsScenario(),
  mcp: () => mcpScenario(),
  console: () => consoleScenario(),
  'console-search': () => consoleSearchScenario(),
};

async function main(): Promise<void> {
  const names = process.argv.slice(2);
  if (names.length === 0 || names.some((name) => !(name in SCENARIOS))) {
    process.stderr.write(`usage: npm run bench -- <${Object.keys(SCENARIOS).join('|')}> [...]\n`);
    process.exit(2);
  }
  for (const name of names) {
    const result = await SCENARIOS[name]();
    for (const line of Array.isArray(result) ? result : [result]) process.stdout.write(`${JSON.stringify(line)}\n`);
  }
}

// Exit once every scenario has printed: a scenario that leaves a handle open (a keep-alive socket,
// a Redis or pg client) kept the runner alive after its last line (seen after push-all).
main()
  .then(() => process.exit(0))
  .catch((error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  });
