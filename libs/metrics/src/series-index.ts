import { format } from 'node:util';

export type LabelValues<T extends string> = Partial<Record<T, string | number>>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** The checks prom-client makes of a metric's name and label names, with its messages. */
export function checkNames(name: string, labelNames: readonly string[]): void {
  if (!METRIC_NAME.test(name)) throw new Error('Invalid metric name');
  for (const label of labelNames) if (!LABEL_NAME.test(label)) throw new Error('Invalid label name');
}

/** A label value as the index keys it: prom-client joins values as strings, so 7 is '7'. */
const labelValue = (value: string | number | undefined): string | undefined =>
  typeof value === 'number' ? String(value) : value;

/** Own enumerable keys, counted without building `Object.keys`' array. */
function countKeys(labels: object): number {
  let n = 0;
  for (const key in labels) if (Object.hasOwn(labels, key)) n++;
  return n;
}

/**
 * A metric's series by label values, for `LeanHistogram` and `LeanCounter`: found through one Map
 * per label name (by value, a number as its string, a label left out as `undefined`), so no key
 * string is built per observation; listed in the order of their first use, which is the order
 * prom-client exports them in. A series keeps the label values it was made with, in label-name
 * order. Labels not among the metric's are refused with prom-client's error.
 */
export class SeriesIndex<T extends string, S extends { labels: LabelValues<T> }> {
  /** Every series, in the order of their first use. */
  private list: S[] = [];
  private root = new Map<unknown, unknown>();
  /** Bumped by `clear`: a bound observer finds its series again after one. */
  private clears = 0;

  constructor(
    readonly labelNames: readonly T[],
    private readonly make: (labels: LabelValues<T>) => S,
  ) {}

  get all(): readonly S[] {
    return this.list;
  }

  /** The series of `labels`, made on first use. */
  get(labels: LabelValues<T>): S {
    let node: Map<unknown, unknown> = this.root;
    let named = 0;
    const last = this.labelNames.length - 1;
    for (let i = 0; i < last; i++) {
      const value = labelValue(labels[this.labelNames[i]]);
      if (value !== undefined) named++;
      let next = node.get(value) as Map<unknown, unknown> | undefined;
      if (next === undefined) node.set(value, (next = new Map()));
      node = next;
    }
    const value = last < 0 ? undefined : labelValue(labels[this.labelNames[last]]);
    if (value !== undefined) named++;
    if (named !== countKeys(labels)) this.refuseUnknownLabels(labels);
    let series = node.get(value) as S | undefined;
    if (series === undefined) {
      const own: LabelValues<T> = {};
      for (const name of this.labelNames) if (labels[name] !== undefined) own[name] = labels[name];
      series = this.make(own);
      node.set(value, series);
      this.list.push(series);
    }
    return series;
  }

  /**
   * A getter of `labels`' series that looks it up on its first call (binding makes no series) and
   * again after a `clear`.
   */
  bind(labels: LabelValues<T>): () => S {
    let clears = -1;
    let series: S | undefined;
    return () => {
      if (clears !== this.clears || series === undefined) {
        series = this.get(labels);
        clears = this.clears;
      }
      return series;
    };
  }

  clear(): void {
    this.list = [];
    this.root = new Map();
    this.clears++;
  }

  private refuseUnknownLabels(labels: LabelValues<T>): void {
    for (const label of Object.keys(labels))
      if (!this.labelNames.includes(label as T))
        throw new Error(`Added label "${label}" is not included in initial labelset: ${format([...this.labelNames])}`);
  }
}
