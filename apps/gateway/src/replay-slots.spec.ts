import { ReplaySlots } from './replay-slots';

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('ReplaySlots: bounded, queued, fair replays', () => {
  it('runs at most `slots` at once; the rest wait (never refused) and start as slots free', async () => {
    const seen: Array<[number, number]> = [];
    const slots = new ReplaySlots(2, (active, waiting) => seen.push([active, waiting]));
    const started: number[] = [];
    const releases = new Map<number, () => void>();
    for (const mailbox of [1, 2, 3, 4])
      void slots.acquire(mailbox).then((release) => (started.push(mailbox), releases.set(mailbox, release)));
    await settle();
    expect(started).toEqual([1, 2]);
    expect(seen.at(-1)).toEqual([2, 2]);
    releases.get(1)!();
    releases.get(1)!(); // a second release is a no-op
    await settle();
    expect(started).toEqual([1, 2, 3]);
    expect(seen.at(-1)).toEqual([2, 1]);
    releases.get(2)!();
    releases.get(3)!();
    await settle();
    expect(started).toEqual([1, 2, 3, 4]);
    releases.get(4)!();
    expect(seen.at(-1)).toEqual([0, 0]);
  });

  it('one mailbox holds at most a quarter of the slots: a later agent overtakes its queued replays', async () => {
    const slots = new ReplaySlots(4);
    expect(slots.perMailboxMax).toBe(1);
    const started: string[] = [];
    const releases: Array<() => void> = [];
    const open = (mailbox: number, name: string) =>
      void slots.acquire(mailbox).then((release) => (started.push(name), releases.push(release)));
    open(7, 'a1');
    open(7, 'a2');
    open(7, 'a3');
    open(9, 'b1');
    await settle();
    expect(started).toEqual(['a1', 'b1']);
    releases[0]();
    await settle();
    expect(started).toEqual(['a1', 'b1', 'a2']);
  });

  it('0 slots: no bound', async () => {
    const slots = new ReplaySlots(0);
    const all = await Promise.all([1, 1, 1, 1, 1, 1].map((mailbox) => slots.acquire(mailbox)));
    expect(all).toHaveLength(6);
  });
});
