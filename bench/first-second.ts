import { setTimeout as sleep } from 'node:timers/promises';
import { processCounters } from './cluster';
import { gcCounters, lateTicks, round } from './support';

type Counters = ReturnType<typeof processCounters>;
type Gc = Awaited<ReturnType<typeof gcCounters>>;

export interface FirstSecondReading {
  gc: Gc[];
  counters: Counters[];
}

/**
 * The operator processes' counters just before the first request of load. The GC probe is read
 * first here and last in `firstSecondEnd` (each read takes 20 ms or more), so its window holds the
 * CPU counters' one.
 */
export async function firstSecondStart(pids: ReadonlyArray<number | undefined>): Promise<FirstSecondReading> {
  const gc = await Promise.all(pids.map((pid) => gcCounters(pid)));
  return { gc, counters: pids.map((pid) => processCounters(pid ?? 0)) };
}

/**
 * The same counters one second after `startedAt`, read while the load goes on; `read()` gives them
 * once the caller is done with its load. Settled as soon as it is taken: a process that died
 * meanwhile must not make it an unhandled rejection before anything awaits it.
 */
export function firstSecondEnd(
  pids: ReadonlyArray<number | undefined>,
  startedAt: number,
): { read(): Promise<FirstSecondReading & { seconds: number }> } {
  const reading = sleep(Math.max(0, startedAt + 1000 - performance.now()))
    .then(async () => {
      const counters = pids.map((pid) => processCounters(pid ?? 0));
      const seconds = (performance.now() - startedAt) / 1000;
      return { counters, seconds, gc: await Promise.all(pids.map((pid) => gcCounters(pid))) };
    })
    .then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
  return {
    async read() {
      const settled = await reading;
      if ('error' in settled) throw settled.error;
      return settled.value;
    },
  };
}

/**
 * Each operator process in the first second of load on a fresh operator (the first second's tail
 * in `first_seconds`): its main thread's ms on a CPU and in the run queue, its other threads' CPU
 * (V8's compiler and GC threads, libuv's pool: a fresh process compiles its hot code then), its
 * collections, and, where the stall probe runs (ROOST_BENCH_STALL_PROBE=1), its late ticks (the
 * three longest, split as in `operator_loop_stalls`). `seconds` is the CPU counters' window; the
 * collections and late ticks are counted over a window a few tens of ms wider (the probe's readings
 * around it). The counters come in 10 ms ticks, so each ms figure is ±10 ms.
 */
export function firstSecondProcesses(
  names: string[],
  before: FirstSecondReading,
  after: FirstSecondReading & { seconds: number },
): Array<Record<string, unknown>> {
  return names.map((name, i) => {
    const [b, a] = [before.counters[i], after.counters[i]];
    const [gb, ga] = [before.gc[i], after.gc[i]];
    const ms = (s: number) => round(s * 1000, 1);
    return {
      process: name,
      seconds: round(after.seconds, 2),
      main_thread_on_cpu_ms: ms(a.mainThreadS - b.mainThreadS),
      main_thread_run_queue_ms: ms(a.mainThreadRunQueueS - b.mainThreadRunQueueS),
      other_threads_cpu_ms: ms(a.userS + a.systemS - b.userS - b.systemS - (a.mainThreadS - b.mainThreadS)),
      ...(gb && ga
        ? {
            scavenges: ga.scavenges - gb.scavenges,
            scavenge_ms: round(ga.scavengeMs - gb.scavengeMs, 1),
            mark_compacts: ga.markCompacts - gb.markCompacts,
            mark_compact_ms: round(ga.markCompactMs - gb.markCompactMs, 1),
            other_gc_ms: round(ga.otherGcMs - gb.otherGcMs, 1),
          }
        : {}),
      ...(ga?.stallProbe ? lateTicks(ga) : {}),
    };
  });
}
