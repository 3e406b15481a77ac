import { closeSync, fdatasyncSync, fsyncSync, openSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';

/** What a sync was for: a WAL segment (at commit), another file (checkpoint), a directory (create/rename). */
export type SyncKind = 'wal' | 'data' | 'dir';

/** Emscripten's NODEFS stream: `nfd` is the host file descriptor its reads and writes go to. */
interface NodeFsStream {
  nfd?: number;
  path?: string;
  node: { mode: number };
}

interface EmscriptenModule {
  NODEFS: { stream_ops: Record<string, unknown>; realPath(node: unknown): string };
  FS: { isDir(mode: number): boolean };
}

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;

/**
 * PGlite's NodeFS with a real `fsync`.
 *
 * PGlite runs Postgres in WebAssembly over Emscripten's NODEFS, which writes each page straight to
 * a host file descriptor (`fs.writeSync`, no buffering in between), but has no `fsync` of its own:
 * Postgres' `fsync()` reaches NODEFS as `stream_ops.fsync`, which does not exist, so it returns
 * without syncing anything, and `fdatasync()` is a no-op in Emscripten's syscall layer. PGlite also
 * starts Postgres with `-F` (fsync off). A commit was then in the host's page cache only: it
 * survived a process crash, not an OS crash or a power cut.
 *
 * This file system gives NODEFS an `fsync` that calls the host's (fdatasync for WAL segments, which
 * Postgres preallocates; fsync for anything else, directories included), and `durableStartParams`
 * turns Postgres' own fsync back on with `wal_sync_method = fsync` (the method that goes through
 * `stream_ops.fsync`). Postgres then decides when to sync exactly as it does on a host: the WAL up
 * to the commit record before `COMMIT` returns (one sync per transaction, so a batch of envelopes
 * in one transaction shares it), data files at each checkpoint before the checkpoint record, the
 * directory after creating or renaming a file.
 */
export class DurableNodeFS extends NodeFS {
  constructor(
    dataDir: string,
    private readonly onSync?: (kind: SyncKind) => void,
  ) {
    super(dataDir);
  }

  override async init(pg: PGlite, opts: Parameters<NodeFS['init']>[1]): ReturnType<NodeFS['init']> {
    const result = await super.init(pg, opts);
    const onSync = this.onSync;
    const preRun = (result.emscriptenOpts.preRun ?? []) as Array<(module: EmscriptenModule) => void>;
    preRun.push((module) => {
      module.NODEFS.stream_ops.fsync = (stream: NodeFsStream): number => {
        const dir = (stream.node.mode & S_IFMT) === S_IFDIR;
        const path = module.NODEFS.realPath(stream.node);
        const kind: SyncKind = dir ? 'dir' : path.includes('/pg_wal/') ? 'wal' : 'data';
        if (stream.nfd !== undefined) {
          if (kind === 'wal') fdatasyncSync(stream.nfd);
          else fsyncSync(stream.nfd);
        } else {
          // Not opened on the host (never seen for Postgres' files): sync the path itself.
          const fd = openSync(path, 'r');
          try {
            fsyncSync(fd);
          } finally {
            closeSync(fd);
          }
        }
        onSync?.(kind);
        return 0;
      };
    });
    return { emscriptenOpts: { ...result.emscriptenOpts, preRun: preRun } };
  }
}

/**
 * PGlite's start parameters with Postgres' fsync on (PGlite's default has `-F`, fsync off) and the
 * WAL synced with `fsync()`, the call DurableNodeFS implements.
 */
export function durableStartParams(): string[] {
  return [
    ...PGlite.defaultStartParams.filter((param) => param !== '-F'),
    '-c',
    'fsync=on',
    '-c',
    'wal_sync_method=fsync',
  ];
}
