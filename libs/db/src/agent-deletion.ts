import { sql, type Kysely } from 'kysely';
import type { DB } from './schema';

/**
 * Delete agents, keeping what they delivered (EXTENSIONS.md §5), inside the caller's transaction.
 * Each row becomes a tombstone: no token, no profile, no allowlist; its blocks, schedules, pending
 * files and mailbox (every entry of it, as a recipient too) go. Envelopes it sent that some mailbox
 * still holds stay as they are, with their files and receipts; the ones no mailbox holds go.
 * Returns the ids it deleted (those not already deleted).
 *
 * Lock order matches the accept path (mailbox rows in id order, then the sender's agent row), so a
 * concurrent send to or from a deleted agent waits or fails with 404 instead of deadlocking.
 */
export async function deleteAgents(trx: Kysely<DB>, agentIds: readonly number[], now: number): Promise<number[]> {
  if (agentIds.length === 0) return [];
  const ids = [...agentIds].sort((a, b) => a - b);
  await sql`select agent_id from mailboxes where agent_id = any(${ids}::bigint[]) order by agent_id for update`.execute(
    trx,
  );
  const deleted = await trx
    .updateTable('agents')
    .set((eb) => ({
      deleted_at: now,
      token_hash: null,
      allowlist: [],
      display_name: eb.ref('handle'),
      description: null,
      card_body: null,
      visibility: 'private',
      updated_at: now,
    }))
    .where('id', '=', sql<number>`any(${ids}::bigint[])`)
    .where('deleted_at', 'is', null)
    .returning('id')
    .execute();
  const gone = deleted.map((row) => row.id);
  if (gone.length === 0) return [];
  const byId = sql<number>`any(${gone}::bigint[])`;
  await trx.deleteFrom('blocks').where('agent_id', '=', byId).execute();
  await trx.deleteFrom('schedules').where('owner_id', '=', byId).execute();
  await trx.deleteFrom('files').where('uploader_id', '=', byId).where('envelope_id', 'is', null).execute();
  // Its mailbox entries (trigger mailboxes_delete_entries, migration 0007) and retention mark (cascade) go with it;
  // a send to it now finds no mailbox (404).
  await trx.deleteFrom('mailboxes').where('agent_id', '=', byId).execute();
  // What it sent that no mailbox holds (to itself only, or already purged everywhere) has no reader
  // left: it goes now, with its files and the receipts answering it (as retention would).
  await sql`
    delete from envelopes e
    where e.sender_id = ${byId}
      and not exists (select 1 from mailbox_entries m where m.envelope_id = e.id)`.execute(trx);
  return gone;
}

/** foreign_key_violation, and restrict_violation (what newer Postgres raises for RESTRICT). */
const FOREIGN_KEY_REFUSALS = new Set(['23503', '23001']);

/**
 * Remove the tombstones of `agentIds` that no stored envelope names as sender, which frees their
 * handles; returns how many. One statement per agent, outside the deleting transaction: a send
 * that committed from the agent meanwhile makes the foreign key refuse (23503) for that agent
 * alone, and its tombstone stays until retention purges that envelope too.
 */
export async function releaseHandles(db: Kysely<DB>, agentIds: readonly number[]): Promise<number> {
  let released = 0;
  for (const id of agentIds) {
    try {
      const result = await sql`
        delete from agents a
        where a.id = ${id} and a.deleted_at is not null
          and not exists (select 1 from envelopes e where e.sender_id = a.id)`.execute(db);
      released += Number(result.numAffectedRows ?? 0);
    } catch (error) {
      if (!FOREIGN_KEY_REFUSALS.has((error as { code?: string }).code ?? '')) throw error;
    }
  }
  return released;
}
