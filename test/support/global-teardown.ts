export default async function globalTeardown(): Promise<void> {
  for (const container of globalThis.__roostContainers ?? []) await container.stop();
}
