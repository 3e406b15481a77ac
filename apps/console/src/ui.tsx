import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorBanner({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

/** Load `load()` when `deps` change; `reload` runs it again (after a write). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setLoading(true);
    load().then(
      (value) => {
        if (mine !== generation.current) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      },
      (failure: unknown) => {
        if (mine !== generation.current) return;
        setError(failure);
        setLoading(false);
      },
    );
  }, deps);
  useEffect(run, [run]);
  return { data, error, loading, reload: run, setData };
}

/** A secret shown exactly once, with a copy button; the page never stores it. */
export function TokenReveal({ label, token, onDone }: { label: string; token: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(token);
    } catch {
      // Clipboard refused (insecure origin): leave the text selected for Ctrl+C.
      field.current?.select();
      return;
    }
    setCopied(true);
  };
  return (
    <section class="reveal" aria-labelledby="reveal-title">
      <h2 id="reveal-title">{label}</h2>
      <p>This token is shown once. Copy it now: the console cannot show it again.</p>
      <div class="row">
        <label class="grow">
          <span class="sr-only">Token</span>
          <input ref={field} class="mono" readOnly value={token} data-testid="token" onFocus={(e) => e.currentTarget.select()} />
        </label>
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
    </section>
  );
}

/** Deletion needs the exact name typed: one stray click must not delete a tenant. */
export function ConfirmDelete({
  what,
  name,
  children,
  onConfirm,
  onCancel,
}: {
  what: string;
  name: string;
  children?: ComponentChildren;
  onConfirm: () => Promise<void>;
  onCancel: () => void;
}) {
  const [typed, setTyped] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  const submit = async (event: Event) => {
    event.preventDefault();
    if (typed !== name) return;
    setBusy(true);
    try {
      await onConfirm();
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  return (
    <form class="danger" onSubmit={(e) => void submit(e)} aria-label={`Delete ${what}`}>
      <h2>
        Delete {what} <span class="mono">{name}</span>
      </h2>
      {children}
      <label>
        Type <strong class="mono">{name}</strong> to confirm
        <input ref={field} value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" spellcheck={false} />
      </label>
      <ErrorBanner error={error} />
      <div class="row">
        <button type="submit" class="destructive" disabled={typed !== name || busy}>
          Delete {what}
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function when(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function href(...segments: string[]): string {
  return `#/${segments.map(encodeURIComponent).join('/')}`;
}

/** A horizontally scrollable table wrapper that keyboard users can scroll too. */
export function Scroll({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="scroll" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
