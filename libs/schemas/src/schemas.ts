import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import { AsmtpError, type ErrorCode } from '#domain';

const BASE = 'https://roost.dev/schemas/';

/** Names of the wire schemas in libs/schemas/wire (file name without `.schema.json`). */
export type SchemaName =
  | 'accepted'
  | 'admin-agent'
  | 'admin-agent-create'
  | 'admin-agent-list'
  | 'admin-agent-patch'
  | 'agent-discovery'
  | 'agent-response'
  | 'agent-self-patch'
  | 'allowlist'
  | 'allowlist-add'
  | 'block'
  | 'block-create'
  | 'blocks-page'
  | 'error'
  | 'file'
  | 'header'
  | 'health'
  | 'mailbox-page'
  | 'mailbox-read'
  | 'mailbox-read-result'
  | 'messages-batch'
  | 'monitor-fact'
  | 'org'
  | 'org-create'
  | 'org-list'
  | 'org-patch'
  | 'post-message'
  | 'search'
  | 'search-agents'
  | 'search-messages'
  | 'stored-envelope'
  | 'unblocked'
  | (string & {});

export function schemasDir(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    const candidate = join(dir, 'libs', 'schemas', 'wire');
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`libs/schemas/wire not found above ${from}`);
    dir = parent;
  }
}

type Schema = Record<string, unknown>;

const ajvOptions = { strict: true, strictTypes: false, strictRequired: false } as const;

/** Every wire schema compiled once (JSON Schema 2020-12), by two Ajv instances. */
class WireSchemas {
  /** Collects every error: for tests, which report all the ways a response is wrong. */
  private readonly ajv = new Ajv2020({ ...ajvOptions, allErrors: true });
  /** Stops at the first error: requests, where a body with 100k bad elements must stay cheap. */
  private readonly fast = new Ajv2020({ ...ajvOptions, allErrors: false });
  private readonly schemas = new Map<string, Schema>();
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly fastValidators = new Map<string, ValidateFunction>();

  constructor(dir: string) {
    for (const ajv of [this.ajv, this.fast]) {
      ajv.addKeyword({ keyword: 'x-error', schemaType: 'string' });
      ajv.addKeyword({ keyword: 'x-field-order', schemaType: 'array' });
    }
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.schema.json')).sort()) {
      const schema = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Schema;
      this.schemas.set(file.replace(/\.schema\.json$/, ''), schema);
      this.ajv.addSchema(schema);
      this.fast.addSchema(schema);
    }
  }

  /** The whole request schema, first error only. */
  fastValidator(name: SchemaName): ValidateFunction {
    let validate = this.fastValidators.get(name);
    if (!validate) {
      validate = this.fast.getSchema(`${BASE}${name}.schema.json`);
      if (!validate) throw new Error(`unknown wire schema ${name}`);
      this.fastValidators.set(name, validate);
    }
    return validate;
  }

  /** One property's subschema on its own (its refs made absolute), first error only. */
  fieldValidator(name: SchemaName, field: string): ValidateFunction {
    const key = `${name}#${field}`;
    let validate = this.fastValidators.get(key);
    if (!validate) {
      const property = (this.schema(name).properties as Record<string, Schema>)[field];
      validate = this.fast.compile(absoluteRefs(property, `${BASE}${name}.schema.json`) as Schema);
      this.fastValidators.set(key, validate);
    }
    return validate;
  }

  isCompiled(name: SchemaName): boolean {
    return this.fastValidators.has(name);
  }

  names(): string[] {
    return [...this.schemas.keys()];
  }

  schema(name: SchemaName): Schema {
    const schema = this.schemas.get(name);
    if (!schema) throw new Error(`unknown wire schema ${name}`);
    return schema;
  }

  validator(name: SchemaName): ValidateFunction {
    let validate = this.validators.get(name);
    if (!validate) {
      validate = this.ajv.getSchema(`${BASE}${name}.schema.json`);
      if (!validate) throw new Error(`unknown wire schema ${name}`);
      this.validators.set(name, validate);
    }
    return validate;
  }
}

let shared: WireSchemas | undefined;
const wire = (): WireSchemas => (shared ??= new WireSchemas(schemasDir()));

/** The schemas `validateRequest` is called with: request bodies. */
export const REQUEST_SCHEMAS: readonly SchemaName[] = [
  'post-message',
  'schedule-create',
  'schedule-patch',
  'admin-agent-create',
  'admin-agent-patch',
  'org-create',
  'org-patch',
  'agent-self-patch',
  'allowlist-add',
  'block-create',
  'mailbox-read',
  'receipt-create',
];

/**
 * Compile every request validator, and each of its per-field validators, now. Ajv compiles on
 * first use otherwise: ~100–350 ms of one event-loop turn on the first POST /messages of a fresh
 * process, stalling every request and frame behind it. Called at start-up, before listening.
 */
export function compileRequestValidators(): void {
  const schemas = wire();
  for (const name of REQUEST_SCHEMAS) {
    schemas.fastValidator(name);
    for (const field of (schemas.schema(name)['x-field-order'] as string[] | undefined) ?? []) {
      if ((schemas.schema(name).properties as Record<string, Schema> | undefined)?.[field]) schemas.fieldValidator(name, field);
    }
  }
}

/** Whether `name`'s request validator is compiled (for the test of compileRequestValidators). */
export const requestValidatorCompiled = (name: SchemaName): boolean => wire().isCompiled(name);

export const wireSchemaNames = (): string[] => wire().names();
export const wireSchema = (name: SchemaName): Schema => wire().schema(name);

/**
 * Validate a request body and map its first failure, in the schema's `x-field-order`, onto its
 * ASMTP error code (`x-error` of the innermost subschema on the failing path). Each field is checked
 * on its own, in order, stopping at its first error: the cost stays small however bad the body.
 */
export function validateRequest<T>(name: SchemaName, body: unknown): T {
  const whole = wire().fastValidator(name);
  if (whole(body)) return body as T;
  const firstError = whole.errors?.[0];
  const schema = wire().schema(name);
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const record = body as Record<string, unknown>;
    for (const field of (schema['x-field-order'] as string[] | undefined) ?? []) {
      const property = properties[field];
      const fallback = (property?.['x-error'] as string | undefined) ?? 'INVALID_REQUEST';
      if (!(field in record)) {
        if (required.has(field)) throw new AsmtpError(400, fallback as ErrorCode, `/${field} is required`);
        continue;
      }
      const validate = wire().fieldValidator(name, field);
      if (validate(record[field])) continue;
      const error = validate.errors![0];
      const code = errorCodeOf(property, error) ?? fallback;
      throw new AsmtpError(400, code as ErrorCode, `/${field}${error.instancePath} ${error.message ?? 'is invalid'}`);
    }
  }
  const code = (firstError && errorCodeOf(schema, firstError)) ?? 'INVALID_REQUEST';
  const where = firstError?.instancePath || (firstError && fieldOf(firstError) ? `/${fieldOf(firstError)}` : '');
  throw new AsmtpError(400, code as ErrorCode, `${where || 'body'} ${firstError?.message ?? 'is invalid'}`.trim());
}

/** A copy of `schema` whose `$ref`s resolve without the document it came from. */
function absoluteRefs(schema: unknown, documentId: string): unknown {
  if (Array.isArray(schema)) return schema.map((item) => absoluteRefs(item, documentId));
  if (schema === null || typeof schema !== 'object') return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$ref' && typeof value === 'string' && !/^[a-z]+:/.test(value)) {
      copy[key] = value.startsWith('#') ? `${documentId}${value}` : `${BASE}${value}`;
    } else copy[key] = absoluteRefs(value, documentId);
  }
  return copy;
}

/** Schema violations of a response body, as readable strings (empty when valid). Used by tests. */
export function responseViolations(name: SchemaName, body: unknown): string[] {
  const validate = wire().validator(name);
  if (validate(body)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} (${e.schemaPath})`);
}

function fieldOf(error: ErrorObject): string | undefined {
  if (error.instancePath !== '') return decodePointer(error.instancePath.split('/')[1]);
  if (error.keyword === 'required') return (error.params as { missingProperty: string }).missingProperty;
  return undefined;
}

const decodePointer = (segment: string): string => segment.replace(/~1/g, '/').replace(/~0/g, '~');

/**
 * The innermost `x-error` on the failing path. An error raised inside this document is located
 * by its schema path; one raised inside a referenced schema by walking the instance path through
 * `properties`/`items` of this document.
 */
function errorCodeOf(schema: Schema, error: ErrorObject): string | undefined {
  if (error.schemaPath.startsWith('#/')) {
    if (error.keyword === 'required') {
      const missing = (error.params as { missingProperty: string }).missingProperty;
      const holder = walkToParent(schema, error.schemaPath);
      const code = (holder?.properties as Record<string, Schema> | undefined)?.[missing]?.['x-error'];
      if (typeof code === 'string') return code;
    }
    let node: unknown = schema;
    let code: string | undefined;
    for (const segment of error.schemaPath.slice(2).split('/').map(decodePointer)) {
      if (node === null || typeof node !== 'object') break;
      node = (node as Record<string, unknown>)[segment];
      const here = (node as Schema | undefined)?.['x-error'];
      if (typeof here === 'string') code = here;
    }
    if (code !== undefined) return code;
  }
  let node: Schema | undefined = schema;
  let code: string | undefined;
  const segments = error.instancePath === '' ? [] : error.instancePath.slice(1).split('/').map(decodePointer);
  for (const segment of segments) {
    if (node === undefined) break;
    const properties = node.properties as Record<string, Schema> | undefined;
    node = /^\d+$/.test(segment) && node.items !== undefined ? (node.items as Schema) : properties?.[segment];
    if (typeof node?.['x-error'] === 'string') code = node['x-error'];
  }
  return code;
}

/** The subschema holding the keyword at `schemaPath` (`#/a/b/required` → the schema at `#/a/b`). */
function walkToParent(schema: Schema, schemaPath: string): Schema | undefined {
  const segments = schemaPath.slice(2).split('/').map(decodePointer);
  let node: unknown = schema;
  for (const segment of segments.slice(0, -1)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  return node as Schema | undefined;
}
