import type * as Client from '../../client/src/types';
import type { WireType } from './schemas';

/**
 * The SDK's hand-written wire types (libs/client is published without the schemas) against the
 * types inferred from the schemas: tsc fails this file when either side drifts. What the SDK sends
 * must be a body the schema accepts; what the operator answers must fit the SDK's type.
 */
type Fits<A, B> = [A] extends [B] ? true : false;
/** An interface as a plain object type (interfaces have no implicit index signature). */
type Plain<T> = { [K in keyof T]: T[K] };

const sends: [
  Fits<Plain<Client.PostMessage>, WireType<'post-message'>>,
  Fits<Plain<Client.ReceiptInput>, WireType<'receipt-create'>>,
  Fits<Plain<Client.AgentSelfPatch>, WireType<'agent-self-patch'>>,
  Fits<Plain<Client.AdminAgentInput & { handle: string }>, WireType<'admin-agent-create'>>,
  Fits<Plain<Client.AdminAgentInput>, WireType<'admin-agent-patch'>>,
  Fits<Plain<Client.OrgInput & { name: string }>, WireType<'org-create'>>,
  Fits<Plain<Client.OrgInput>, WireType<'org-patch'>>,
] = [true, true, true, true, true, true, true];

// Content parts and a schedule's envelope are left out: FromSchema does not read their if/then
// rules, so the schema side is looser there than the SDK's discriminated union.
const answers: [
  Fits<WireType<'accepted'>, Client.Accepted>,
  Fits<WireType<'header'>, Client.Header>,
  Fits<Omit<WireType<'stored-envelope'>, 'content_parts'>, Omit<Client.StoredEnvelope, 'content_parts'>>,
  Fits<WireType<'health'>, Client.Health>,
  Fits<WireType<'receipt'>, Client.Receipt>,
  Fits<Omit<WireType<'schedule'>, 'envelope'>, Omit<Client.Schedule, 'envelope'>>,
  Fits<WireType<'admin-agent'>, Client.AdminAgent>,
  Fits<WireType<'org'>, Client.Org>,
] = [true, true, true, true, true, true, true, true];

describe('libs/client wire types follow the schemas', () => {
  it('is checked by tsc (npm run typecheck); at run time nothing is left to check', () => {
    expect([...sends, ...answers].every(Boolean)).toBe(true);
  });
});
