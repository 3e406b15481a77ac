/** A recurring job: a trigger; the state it acts on lives in Postgres, so running twice is harmless. */
export interface JobDefinition {
  name: string;
  everyMs: number;
  run(): Promise<void>;
}

/** The job port: BullMQ job schedulers (production) or in-process timers (embedded). */
export abstract class JobRunner {
  abstract start(jobs: readonly JobDefinition[]): Promise<void>;
  abstract stop(): Promise<void>;
  abstract ready(): Promise<boolean>;
  /** Jobs per state of each queue (metrics); null when the runner has no queue or it is unreachable. */
  abstract counts(): Promise<Array<{ queue: string; state: JobState; jobs: number }> | null>;
}

export const JOB_STATES = ['waiting', 'active', 'failed', 'delayed'] as const;
export type JobState = (typeof JOB_STATES)[number];

export interface JobObserver {
  onFinished(name: string, seconds: number, failed: boolean): void;
}
