import { Injectable } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';

/**
 * The time schedules run on. Production uses the wall clock; tests may accelerate it
 * (ROOST_CLOCK_SPEED, ROOST_CLOCK_EPOCH_MS: every process computes the same simulated time) or
 * replace the provider with a manual clock.
 */
@Injectable()
export class Clock {
  private readonly speed: number;
  private readonly epoch: number;

  constructor(@InjectConfig() config: Config) {
    this.speed = config.clock.speed;
    this.epoch = config.clock.epochMs || Date.now();
  }

  now(): number {
    if (this.speed === 1) return Date.now();
    return Math.floor(this.epoch + (Date.now() - this.epoch) * this.speed);
  }
}
