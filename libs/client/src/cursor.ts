import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Cursor } from './types';

/**
 * `(created_at, envelope_id)` order of ASMTP.md §3.5 (ids compared as byte strings). The operator's
 * is libs/domain `compareCursors`; kept here so the published SDK stands alone (a spec holds the
 * two equal on the same vectors).
 */
export function compareCursors(a: Cursor, b: Cursor): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.envelope_id < b.envelope_id ? -1 : a.envelope_id > b.envelope_id ? 1 : 0;
}

export const maxCursor = (a: Cursor | null, b: Cursor | null): Cursor | null =>
  a === null ? b : b === null ? a : compareCursors(a, b) >= 0 ? a : b;

/** A cursor before every envelope: asks a resuming `/connect` for the whole mailbox. */
export const ORIGIN: Cursor = { created_at: 0, envelope_id: '01000000000000000000000000' };

/**
 * The persisted watermark, in the ASMTP CLI's file shape (ASMTP.md §6.6) so either tool can pick up
 * where the other stopped: the cursor plus recently delivered ids, which de-duplicate the frames a
 * crash between delivery and save would replay.
 */
export interface WatermarkFile {
  last_seen_created_at: number | null;
  last_seen_envelope_id: string | null;
  dedup_ids: Record<string, number>;
}

/**
 * Write `text` to `file` atomically: a temp file in the same folder (mode 0600), then rename, so a
 * reader or a crash never sees half a file.
 */
export function writeFileAtomic(file: string, text: string, mode = 0o600): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    writeFileSync(temp, text, { mode });
    renameSync(temp, file);
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {
      // already gone
    }
    throw error;
  }
}

export interface CursorState {
  cursor: Cursor | null;
  /** id → created_at of recently delivered envelopes. */
  recent: Map<string, number>;
}

/** Where a listener keeps its cursor between runs. */
export interface CursorStore {
  load(): CursorState;
  save(state: CursorState): void;
}

/** In memory only (the default when no file is given). */
export class MemoryCursorStore implements CursorStore {
  private state: CursorState = { cursor: null, recent: new Map() };
  constructor(initial: Cursor | null = null) {
    this.state.cursor = initial;
  }
  load(): CursorState {
    return { cursor: this.state.cursor, recent: new Map(this.state.recent) };
  }
  save(state: CursorState): void {
    this.state = { cursor: state.cursor, recent: new Map(state.recent) };
  }
}

/** Dedup entries older than the cursor by more than this are dropped (ASMTP.md §6.6). */
const DEDUP_WINDOW_MS = 30_000;
const DEDUP_FILE_MAX = 1000;

/** A JSON file, written atomically with mode 0600. A missing or corrupt file is a fresh start. */
export class FileCursorStore implements CursorStore {
  constructor(readonly file: string) {}

  load(): CursorState {
    try {
      const data = JSON.parse(readFileSync(this.file, 'utf8')) as Partial<WatermarkFile>;
      const cursor =
        typeof data.last_seen_created_at === 'number' && typeof data.last_seen_envelope_id === 'string'
          ? { created_at: data.last_seen_created_at, envelope_id: data.last_seen_envelope_id }
          : null;
      const recent = new Map<string, number>();
      for (const [id, at] of Object.entries(data.dedup_ids ?? {})) if (typeof at === 'number') recent.set(id, at);
      return { cursor, recent };
    } catch {
      return { cursor: null, recent: new Map() };
    }
  }

  save(state: CursorState): void {
    const floor = (state.cursor?.created_at ?? 0) - DEDUP_WINDOW_MS;
    const kept = [...state.recent].filter(([, at]) => at >= floor).slice(-DEDUP_FILE_MAX);
    const file: WatermarkFile = {
      last_seen_created_at: state.cursor?.created_at ?? null,
      last_seen_envelope_id: state.cursor?.envelope_id ?? null,
      dedup_ids: Object.fromEntries(kept),
    };
    writeFileAtomic(this.file, `${JSON.stringify(file)}\n`);
  }
}

/** A set that forgets its oldest members past `limit` (insertion order). */
export class BoundedSet {
  private readonly items = new Set<string>();
  constructor(private readonly limit: number) {}
  has(key: string): boolean {
    return this.items.has(key);
  }
  add(key: string): void {
    if (this.items.has(key)) return;
    this.items.add(key);
    if (this.items.size > this.limit) {
      const oldest = this.items.values().next().value as string;
      this.items.delete(oldest);
    }
  }
  get size(): number {
    return this.items.size;
  }
}
