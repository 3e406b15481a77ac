import { EventEmitter } from 'node:events';
import { Injectable } from '@nestjs/common';
import { FrameBus, type AgentControl, type ControlListener, type Delivery, type DeliveryListener } from './bus';

/** The embedded default: api and gateway share one process, so frames go through an emitter. */
@Injectable()
export class InProcessFrameBus extends FrameBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  async publish(delivery: Delivery): Promise<void> {
    this.emitter.emit('delivery', delivery);
  }

  async publishControl(control: AgentControl): Promise<void> {
    this.emitter.emit('control', control);
  }

  onDelivery(listener: DeliveryListener): () => void {
    this.emitter.on('delivery', listener);
    return () => this.emitter.off('delivery', listener);
  }

  onControl(listener: ControlListener): () => void {
    this.emitter.on('control', listener);
    return () => this.emitter.off('control', listener);
  }
}
