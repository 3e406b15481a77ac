/** One header frame for one recipient mailbox, published after the accept transaction commits. */
export interface HeaderFrame {
  mailbox_id: number;
  seq: number;
  envelope_id: string;
  created_at: number;
  /** The `envelope.notify` JSON text, exactly as the socket will carry it. */
  header: string;
}

/** A `monitor.fact` frame for the sender's sockets (ASMTP.md §6.4); never persisted or replayed. */
export interface MonitorFrame {
  mailbox_id: number;
  frame: string;
}

/** What one accept commit produced: header frames in recipient order, then monitor facts. */
export interface Delivery {
  committed_at: number;
  frames: HeaderFrame[];
  monitor: MonitorFrame[];
}

/** Control messages every gateway must see (e.g. close an agent's sockets on token rotation). */
export interface AgentControl {
  kind: 'revoke';
  mailbox_id: number;
}

export type DeliveryListener = (delivery: Delivery) => void;
export type ControlListener = (control: AgentControl) => void;

/**
 * The frame bus port: api nodes publish after commit, gateways subscribe. Adapters: Redis
 * Streams (production) and in-process (embedded). Publishing is best-effort by design; gateways
 * backfill gaps from Postgres by `seq`, so a lost publish costs latency, never an envelope.
 */
export abstract class FrameBus {
  abstract publish(delivery: Delivery): Promise<void>;
  abstract publishControl(control: AgentControl): Promise<void>;
}
