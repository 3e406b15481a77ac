import { type OpenMetricsContentType, type PrometheusContentType, Registry } from 'prom-client';

/** What a metric's `registers` takes. */
type Registers = Array<Registry<PrometheusContentType> | Registry<OpenMetricsContentType>>;

/** A text registry and an OpenMetrics one: where a metric under test registers. */
export interface Registries {
  text: Registry;
  open: Registry<OpenMetricsContentType>;
}

export function registries(): Registries {
  const open = new Registry<OpenMetricsContentType>();
  open.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  return { text: new Registry(), open };
}

/**
 * The same metric made twice, prom-client's class and Roost's lean one (`libs/metrics`), each on its
 * own pair of registries, for `expectSameExport`.
 */
export function promPair<P, L>(
  makeProm: (registers: Registers) => P,
  makeLean: (registers: Registers) => L,
): { prom: P; lean: L; promRegistry: Registries; leanRegistry: Registries } {
  const promRegistry = registries();
  const leanRegistry = registries();
  return {
    prom: makeProm([promRegistry.text, promRegistry.open]),
    lean: makeLean([leanRegistry.text, leanRegistry.open]),
    promRegistry,
    leanRegistry,
  };
}

/** The text format, OpenMetrics and the registry's JSON: the same for both. */
export async function expectSameExport(prom: Registries, lean: Registries): Promise<void> {
  expect(await lean.text.metrics()).toBe(await prom.text.metrics());
  expect(await lean.open.metrics()).toBe(await prom.open.metrics());
  expect(await lean.text.getMetricsAsJSON()).toEqual(await prom.text.getMetricsAsJSON());
}
