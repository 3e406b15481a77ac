import { Injectable } from '@nestjs/common';
import { FilesRepository, type FileContent } from '#db';
import {
  badRequest,
  checkUpload,
  FILE_TTL_MS,
  isFileId,
  multipartBoundary,
  newFileId,
  notFound,
  parseFirstFilePart,
  sanitizeFilename,
  type Agent,
} from '#domain';

/** Uploads (ASMTP.md §7.1) and downloads (§7.3). A new upload is pending until an envelope claims it. */
@Injectable()
export class FilesService {
  constructor(private readonly files: FilesRepository) {}

  async upload(agent: Agent, contentType: string | undefined, body: Buffer, truncated: boolean) {
    const boundary = multipartBoundary(contentType);
    if (truncated) throw badRequest('INVALID_FILE', 'file is larger than 10 MiB');
    const part = parseFirstFilePart(body, boundary);
    const type = checkUpload(part.contentType, part.bytes);
    const filename = sanitizeFilename(part.filename);
    const createdAt = Date.now();
    const file = {
      id: newFileId(),
      uploader_id: agent.id,
      filename,
      content_type: type,
      size_bytes: part.bytes.length,
      bytes: Buffer.from(part.bytes),
      created_at: createdAt,
      expires_at: createdAt + FILE_TTL_MS,
    };
    await this.files.insert(file);
    return {
      id: file.id,
      status: 'ready',
      filename,
      content_type: type,
      size_bytes: file.size_bytes,
      created_at: createdAt,
      expires_at: file.expires_at,
    };
  }

  async download(agent: Agent, fileId: string): Promise<FileContent> {
    const file = isFileId(fileId) ? await this.files.findForParty(fileId, agent.id) : undefined;
    if (!file) throw notFound();
    return file;
  }
}
