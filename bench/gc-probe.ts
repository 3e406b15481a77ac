import { openSync, readSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { GCProfiler, getHeapStatistics } from 'node:v8';

/**
 * Preloaded into every operator process the bench starts (`--require`, see profileArgs in
 * support.ts; ROOST_BENCH_GC_PROBE=0 leaves it out). It counts what the process's own garbage
 * collections report (V8's GCProfiler: heap statistics before and after each one): bytes allocated
 * on the V8 heap (what each collection found in use minus what the previous one left, plus the
 * growth since the last), scavenges and mark-compacts with their time, and what survived each
 * scavenge. On SIGUSR2 it writes the running totals to `gcProbeFile(pid)`; the bench reads them
 * before and after the counted seconds. Silent and passive otherwise.
 *
 * With ROOST_BENCH_STALL_PROBE=1 (the push scenarios set it) it also watches the main thread's
 * event loop with a 5 ms timer and splits every late tick by what the kernel says the thread did
 * meanwhile (`/proc/<pid>/task/<pid>/schedstat`: time on a CPU, time runnable but waiting for one)
 * and by the GC pauses that overlap it: a stall of the operator's own work looks different from
 * one where the thread sat in the run queue while other processes had the cores.
 */

export interface GcCounters {
  allocatedBytes: number;
  scavenges: number;
  scavengeMs: number;
  markCompacts: number;
  markCompactMs: number;
  /** Other kinds (incremental marking steps, weak callbacks). */
  otherGcs: number;
  otherGcMs: number;
  /** Young-generation bytes left after each scavenge, summed: a scavenge's cost follows them. */
  scavengeSurvivedBytes: number;
  /** Whether the stall probe runs (ROOST_BENCH_STALL_PROBE=1). */
  stallProbe: boolean;
  /** With the stall probe: late ticks since the previous write, the longest first (at most 10 kept), and their count. */
  stalls: LoopStall[];
  stallCount: number;
}

/** One late tick of the stall probe's 5 ms timer (ms). */
export interface LoopStall {
  /** Between the tick and the one before (5 when on time). */
  intervalMs: number;
  /** Of that, the main thread on a CPU: its own JavaScript, GC's main-thread share, system calls. */
  onCpuMs: number;
  /** Of that, runnable but waiting for a CPU while the kernel ran other threads or processes. */
  runQueueMs: number;
  /** GC pauses overlapping the interval (V8's `gc` performance entries). */
  gcMs: number;
}

const TICK_MS = 5;
/** A tick this much later than due is a stall. */
const STALL_MS = 5;
const KEPT_STALLS = 10;

/**
 * The main thread's [on CPU, in the run queue] in ms, or zeros where schedstat is missing. The file
 * stays open and is read again from its start (pread) at every tick: `readFileSync` opened, stat'ed,
 * read and closed it 200 times a second, which in the push scenarios was 13 % of the gateway's and
 * 4 % of the api's CPU (profiles of 2026-12-06): the probe must not weigh on what it measures.
 */
function schedstatReader(): () => [number, number] {
  let fd: number | undefined;
  try {
    fd = openSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'r');
  } catch {
    return () => [0, 0];
  }
  const buffer = Buffer.alloc(128);
  return () => {
    try {
      const read = readSync(fd, buffer, 0, buffer.length, 0);
      const text = buffer.toString('latin1', 0, read);
      const space = text.indexOf(' ');
      return [Number(text.slice(0, space)) / 1e6, Number(text.slice(space + 1, text.indexOf(' ', space + 1))) / 1e6];
    } catch {
      return [0, 0];
    }
  };
}

/** Records late ticks into `stalls` (the longest KEPT_STALLS) and counts them in `count.n`. */
function watchStalls(stalls: LoopStall[], count: { n: number }): void {
  const pauses: Array<[start: number, end: number]> = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push([entry.startTime, entry.startTime + entry.duration]);
    if (pauses.length > 64) pauses.splice(0, pauses.length - 64);
  }).observe({ entryTypes: ['gc'] });
  const schedstat = schedstatReader();
  let last = performance.now();
  let [lastOnCpu, lastRunQueue] = schedstat();
  const tick = () => {
    const now = performance.now();
    const [onCpu, runQueue] = schedstat();
    if (now - last > TICK_MS + STALL_MS) {
      const gcMs = pauses.reduce(
        (sum, [start, end]) => sum + Math.max(0, Math.min(end, now) - Math.max(start, last)),
        0,
      );
      count.n++;
      stalls.push({ intervalMs: now - last, onCpuMs: onCpu - lastOnCpu, runQueueMs: runQueue - lastRunQueue, gcMs });
      stalls.sort((a, b) => b.intervalMs - a.intervalMs);
      if (stalls.length > KEPT_STALLS) stalls.length = KEPT_STALLS;
    }
    last = now;
    lastOnCpu = onCpu;
    lastRunQueue = runQueue;
    setTimeout(tick, TICK_MS).unref();
  };
  setTimeout(tick, TICK_MS).unref();
}

/** Where the totals of process `pid` go (support.ts names the same file; it must not load this module). */
const gcProbeFile = (pid: number) => join(tmpdir(), `roost-bench-gc-${pid}.json`);

interface SpaceStats {
  spaceName: string;
  spaceUsedSize: number;
}
interface GcStat {
  gcType: string;
  cost: number;
  beforeGC: { heapStatistics: { usedHeapSize: number }; heapSpaceStatistics: SpaceStats[] };
  afterGC: { heapStatistics: { usedHeapSize: number }; heapSpaceStatistics: SpaceStats[] };
}

function install(): void {
  const totals: GcCounters = {
    allocatedBytes: 0,
    scavenges: 0,
    scavengeMs: 0,
    markCompacts: 0,
    markCompactMs: 0,
    otherGcs: 0,
    otherGcMs: 0,
    scavengeSurvivedBytes: 0,
    stallProbe: process.env.ROOST_BENCH_STALL_PROBE === '1',
    stalls: [],
    stallCount: 0,
  };
  const stalls: LoopStall[] = [];
  const stallCount = { n: 0 };
  if (totals.stallProbe) watchStalls(stalls, stallCount);
  let profiler = new GCProfiler();
  profiler.start();
  let usedAfterLast = getHeapStatistics().used_heap_size;
  process.on('SIGUSR2', () => {
    const statistics = (profiler.stop() as unknown as { statistics: GcStat[] }).statistics;
    profiler = new GCProfiler();
    profiler.start();
    for (const gc of statistics) {
      totals.allocatedBytes += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - usedAfterLast);
      usedAfterLast = gc.afterGC.heapStatistics.usedHeapSize;
      const ms = gc.cost / 1000; // µs
      if (gc.gcType === 'Scavenge') {
        totals.scavenges++;
        totals.scavengeMs += ms;
        totals.scavengeSurvivedBytes +=
          gc.afterGC.heapSpaceStatistics.find((space) => space.spaceName === 'new_space')?.spaceUsedSize ?? 0;
      } else if (gc.gcType === 'MarkSweepCompact') {
        totals.markCompacts++;
        totals.markCompactMs += ms;
      } else {
        totals.otherGcs++;
        totals.otherGcMs += ms;
      }
    }
    const used = getHeapStatistics().used_heap_size;
    totals.allocatedBytes += Math.max(0, used - usedAfterLast);
    usedAfterLast = used;
    totals.stalls = stalls.splice(0);
    totals.stallCount = stallCount.n;
    stallCount.n = 0;
    writeFileSync(gcProbeFile(process.pid), JSON.stringify(totals));
  });
}

install();
