import * as client from '#client';
import vectors from '../../../test/data/ulid-vectors.json';
import { deterministicUlid, ENVELOPE_ID_PATTERN, isEnvelopeId, isFileId, newFileId, ulid } from './ids';

const VALID = '01JV3Z8W7Q4M2N6P8R0T2V4X6Y';

describe('envelope ids', () => {
  it('are the SDK implementation, not a copy', () => {
    expect(ulid).toBe(client.ulid);
    expect(deterministicUlid).toBe(client.deterministicUlid);
    expect(isEnvelopeId).toBe(client.isEnvelopeId);
  });

  it('meet the shared vectors', () => {
    for (const id of vectors.valid) expect(isEnvelopeId(id)).toBe(true);
    for (const id of vectors.invalid) expect(isEnvelopeId(id)).toBe(false);
    for (const { key, ms, id } of vectors.deterministic) expect(deterministicUlid(key, ms)).toBe(id);
    expect(ENVELOPE_ID_PATTERN).toBe('^01[0-9A-HJKMNP-TV-Z]{24}$');
  });
});

describe('file ids', () => {
  it('newFileId is file_ + a 26-char ULID and passes isFileId', () => {
    const id = newFileId();
    expect(id).toMatch(/^file_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isFileId(id)).toBe(true);
  });

  it('isFileId rejects a bare ULID, lower case, wrong length and non-strings', () => {
    expect(isFileId(VALID)).toBe(false);
    expect(isFileId(`file_${VALID.toLowerCase()}`)).toBe(false);
    expect(isFileId(`file_${VALID.slice(1)}`)).toBe(false);
    expect(isFileId(`FILE_${VALID}`)).toBe(false);
    expect(isFileId(undefined)).toBe(false);
  });
});
