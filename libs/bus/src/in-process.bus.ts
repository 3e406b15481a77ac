import { Injectable } from '@nestjs/common';
import { FrameBus, type AgentControl, type Delivery, type FrameSubscriber, type StreamStats } from './bus';

/** The embedded default: api and gateway share one process, so frames are handed over directly. */
@Injectable()
export class InProcessFrameBus extends FrameBus {
  private readonly subscribers = new Set<FrameSubscriber>();

  async publish(delivery: Delivery): Promise<void> {
    for (const subscriber of this.subscribers) {
      for (const frame of delivery.frames) subscriber.onFrame(frame, delivery.committed_at);
      for (const frame of delivery.monitor) subscriber.onMonitor(frame);
    }
  }

  async publishControl(control: AgentControl): Promise<void> {
    for (const subscriber of this.subscribers) subscriber.onControl(control);
  }

  subscribe(subscriber: FrameSubscriber): void {
    this.subscribers.add(subscriber);
  }

  /** Publishing hands frames over synchronously: holding takes effect at once. */
  async hold(): Promise<void> {}

  release(): void {}

  async trim(): Promise<number> {
    return 0; // nothing is kept
  }

  async ready(): Promise<boolean> {
    return true;
  }

  async stats(): Promise<StreamStats[]> {
    return []; // frames are handed over, never queued
  }
}
