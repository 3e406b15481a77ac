import { ulid } from '#client';

// The envelope id grammar and the ULID minting are the wire's: one implementation, in the SDK.
export { deterministicUlid, ENVELOPE_ID_PATTERN, isEnvelopeId, ulid } from '#client';

export const FILE_ID_PATTERN = '^file_[0-9A-HJKMNP-TV-Z]{26}$';
const FILE_ID_RE = new RegExp(FILE_ID_PATTERN);

export const newFileId = (): string => `file_${ulid()}`;
export const isFileId = (value: unknown): value is string => typeof value === 'string' && FILE_ID_RE.test(value);
