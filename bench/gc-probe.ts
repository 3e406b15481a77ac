import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GCProfiler, getHeapStatistics } from 'node:v8';

/**
 * Preloaded into every operator process the bench starts (`--require`, see profileArgs in
 * support.ts; ROOST_BENCH_GC_PROBE=0 leaves it out). It counts what the process's own garbage
 * collections report (V8's GCProfiler: heap statistics before and after each one): bytes allocated
 * on the V8 heap (what each collection found in use minus what the previous one left, plus the
 * growth since the last), scavenges and mark-compacts with their time, and what survived each
 * scavenge. On SIGUSR2 it writes the running totals to `gcProbeFile(pid)`; the bench reads them
 * before and after the counted seconds. Silent and passive otherwise.
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
  };
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
    writeFileSync(gcProbeFile(process.pid), JSON.stringify(totals));
  });
}

install();
