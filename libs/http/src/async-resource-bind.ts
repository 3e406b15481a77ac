import { AsyncResource } from 'node:async_hooks';

/**
 * `AsyncResource#bind` as Node ≥ 24 has it: the bound function without the deprecated
 * `asyncResource` property (DEP0172, End-of-Life there).
 *
 * Node 20 still attaches that property, through two `util.deprecate` wrappers built on every call
 * (nodejs/node#58218, "`deprecate` shows increased use of CPU"; not backported to 20). Fastify
 * binds one callback per request that carries a body, so every `POST /messages` paid for it: under
 * the accept benchmark the operator spent about a fifth of its CPU there. Nothing in Roost or its
 * dependencies reads the deprecated property.
 */
function bind(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) {
  if (typeof fn !== 'function') {
    throw Object.assign(new TypeError(`The "fn" argument must be of type function. Received ${typeof fn}`), { code: 'ERR_INVALID_ARG_TYPE' });
  }
  const resource = this;
  const bound =
    thisArg === undefined
      ? function (this: unknown, ...args: unknown[]) {
          return resource.runInAsyncScope(fn, this, ...args);
        }
      : resource.runInAsyncScope.bind(resource, fn, thisArg);
  Object.defineProperty(bound, 'length', { configurable: true, enumerable: false, writable: false, value: fn.length });
  return bound;
}

/** True when this Node's `AsyncResource#bind` still attaches the deprecated property. */
export function asyncResourceBindIsDeprecatedKind(): boolean {
  return Object.getOwnPropertyDescriptor(new AsyncResource('roost-probe').bind(() => undefined), 'asyncResource') !== undefined;
}

/** Install `bind` above on a Node that needs it (idempotent; a no-op on Node ≥ 24). */
export function useCurrentAsyncResourceBind(): void {
  if (asyncResourceBindIsDeprecatedKind()) (AsyncResource.prototype as { bind: unknown }).bind = bind;
}
