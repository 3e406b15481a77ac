import { fork, type ChildProcess } from 'node:child_process';
import { TcpProxy } from './proxy';

/**
 * A TcpProxy in its own Node process, driven over IPC. The chaos runner's own event loop carries
 * the load generator (thousands of pending requests while an api hangs); a proxy sharing it would
 * slow down with it and turn every fault into a harness-made Postgres slowdown. In its own process
 * the proxy forwards at loopback speed whatever the runner is doing.
 */
type Command =
  | { id: number; op: 'delay'; ms: number; jitterMs: number }
  | { id: number; op: 'partition' | 'cut' | 'heal' | 'stats' | 'close' };

export class ProxyProcess {
  private next = 0;
  private readonly waiting = new Map<number, (reply: any) => void>();

  private constructor(
    readonly name: string,
    readonly port: number,
    private readonly child: ChildProcess,
  ) {
    child.on('message', (reply: { id: number }) => {
      this.waiting.get(reply.id)?.(reply);
      this.waiting.delete(reply.id);
    });
  }

  static async start(name: string, upstreamPort: number): Promise<ProxyProcess> {
    const child = fork(__filename, ['--proxy', name, String(upstreamPort)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const port = await new Promise<number>((done, fail) => {
      child.once('message', (message: { port: number }) => done(message.port));
      child.once('exit', (code) => fail(new Error(`proxy ${name} exited with ${code} before listening`)));
    });
    return new ProxyProcess(name, port, child);
  }

  private send(command: Omit<Command, 'id'>): Promise<any> {
    const id = ++this.next;
    return new Promise((done, fail) => {
      if (!this.child.connected) return fail(new Error(`proxy ${this.name} is gone`));
      this.waiting.set(id, done);
      this.child.send({ ...command, id });
    });
  }

  setDelay(ms: number, jitterMs = 0): Promise<void> {
    return this.send({ op: 'delay', ms, jitterMs } as Omit<Command, 'id'>);
  }

  partition(): Promise<void> {
    return this.send({ op: 'partition' });
  }

  cut(): Promise<void> {
    return this.send({ op: 'cut' });
  }

  heal(): Promise<void> {
    return this.send({ op: 'heal' });
  }

  async stats(): Promise<{ accepted: number; resets: number; open: number }> {
    return this.send({ op: 'stats' });
  }

  async close(): Promise<void> {
    if (!this.child.connected) return;
    await Promise.race([this.send({ op: 'close' }), new Promise((done) => setTimeout(done, 2_000))]);
    this.child.kill('SIGKILL');
  }
}

/** The child: one TcpProxy, commands over IPC; exits when the parent goes. */
async function child(name: string, upstreamPort: number): Promise<void> {
  const proxy = await TcpProxy.start(name, upstreamPort);
  process.on('disconnect', () => process.exit(0));
  const handle = async (command: Command) => {
    if (command.op === 'delay') proxy.setDelay(command.ms, command.jitterMs);
    else if (command.op === 'partition') proxy.partition();
    else if (command.op === 'cut') proxy.cut();
    else if (command.op === 'heal') proxy.heal();
    else if (command.op === 'close') await proxy.close();
    process.send!({ id: command.id, accepted: proxy.accepted, resets: proxy.resets, open: proxy.open });
  };
  process.on('message', (command: Command) => void handle(command));
  process.send!({ port: proxy.port });
}

if (process.argv[2] === '--proxy' && process.send) {
  child(process.argv[3], Number(process.argv[4])).catch((error: unknown) => {
    process.stderr.write(`proxy: ${(error as Error).stack ?? error}\n`);
    process.exit(1);
  });
}
