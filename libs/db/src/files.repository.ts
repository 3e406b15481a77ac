import { Injectable } from '@nestjs/common';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database } from './database';
import type { DB, FilesTable } from './schema';
import { InjectDatabase } from './tokens';

/** A pending upload: not yet claimed by an envelope. */
export type NewFile = Omit<Selectable<FilesTable>, 'envelope_id'>;

export type FileContent = Pick<Selectable<FilesTable>, 'filename' | 'content_type' | 'bytes'>;

@Injectable()
export class FilesRepository {
  private readonly db: Kysely<DB>;

  constructor(@InjectDatabase() database: Database) {
    this.db = database.db;
  }

  async insert(file: NewFile): Promise<void> {
    await this.db.insertInto('files').values(file).execute();
  }

  /**
   * The file if `agentId` may download it (ASMTP.md §7.3): its uploader, or a party (sender or
   * recipient) of the envelope it is bound to.
   */
  async findForParty(fileId: string, agentId: number): Promise<FileContent | undefined> {
    const result = await sql<FileContent>`
      select f.filename, f.content_type, f.bytes from files f
      left join envelopes e on e.id = f.envelope_id
      where f.id = ${fileId}
        and (f.uploader_id = ${agentId}
             or e.sender_id = ${agentId}
             or exists (select 1 from mailbox_entries m where m.mailbox_id = ${agentId} and m.envelope_id = f.envelope_id))`.execute(
      this.db,
    );
    const row = result.rows[0];
    return row ? { ...row, bytes: Buffer.from(row.bytes) } : undefined;
  }
}
