import { Injectable } from '@nestjs/common';
import type { Kysely } from 'kysely';
import { deleteAgents, releaseHandles } from './agent-deletion';
import type { Database } from './database';
import type { Selectable } from 'kysely';
import type { DB, OrgsTable } from './schema';
import { InjectDatabase } from './tokens';

export type Org = Omit<Selectable<OrgsTable>, 'admin_token_hash'>;
export type OrgPatch = Partial<Pick<Org, 'retention_days' | 'content_guard' | 'max_agents'>>;

const ORG_COLUMNS = ['name', 'retention_days', 'content_guard', 'max_agents', 'created_at', 'updated_at'] as const;

@Injectable()
export class OrgsRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  /** undefined when the name is taken. */
  create(name: string, adminTokenHash: string, settings: OrgPatch, now: number): Promise<Org | undefined> {
    return this.db
      .insertInto('orgs')
      .values({ name, admin_token_hash: adminTokenHash, ...settings, created_at: now, updated_at: now })
      .onConflict((oc) => oc.column('name').doNothing())
      .returning(ORG_COLUMNS)
      .executeTakeFirst();
  }

  list(): Promise<Org[]> {
    return this.db.selectFrom('orgs').select(ORG_COLUMNS).orderBy('name').execute();
  }

  find(name: string): Promise<Org | undefined> {
    return this.db.selectFrom('orgs').select(ORG_COLUMNS).where('name', '=', name).executeTakeFirst();
  }

  findByTokenHash(tokenHash: string): Promise<Org | undefined> {
    return this.db.selectFrom('orgs').select(ORG_COLUMNS).where('admin_token_hash', '=', tokenHash).executeTakeFirst();
  }

  update(name: string, patch: OrgPatch, now: number): Promise<Org | undefined> {
    return this.db
      .updateTable('orgs')
      .set({ ...patch, updated_at: now })
      .where('name', '=', name)
      .returning(ORG_COLUMNS)
      .executeTakeFirst();
  }

  rotateToken(name: string, adminTokenHash: string, now: number): Promise<Org | undefined> {
    return this.db
      .updateTable('orgs')
      .set({ admin_token_hash: adminTokenHash, updated_at: now })
      .where('name', '=', name)
      .returning(ORG_COLUMNS)
      .executeTakeFirst();
  }

  /**
   * Delete the organization and every agent `@<name>.*` (`deleteAgents`: envelopes they delivered,
   * to other organizations too, stay with their recipients). Returns the deleted agents' ids, or
   * undefined when there was no such organization.
   */
  async delete(name: string, now: number): Promise<number[] | undefined> {
    const deleted = await this.db.transaction().execute(async (trx) => {
      const org = await trx.deleteFrom('orgs').where('name', '=', name).returning('name').executeTakeFirst();
      if (!org) return undefined;
      const members = await trx
        .selectFrom('agents')
        .select('id')
        .where('owner', '=', name)
        .where('deleted_at', 'is', null)
        .execute();
      return deleteAgents(
        trx,
        members.map((member) => member.id),
        now,
      );
    });
    if (deleted) await releaseHandles(this.db, deleted);
    return deleted;
  }
}
