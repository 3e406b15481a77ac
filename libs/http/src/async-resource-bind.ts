import { AsyncResource } from 'node:async_hooks';

/**
 * `AsyncResource#bind` without the deprecated `asyncResource` property on the bound function
 * (DEP0172, which newer Node moves to End-of-Life: nodejs/node#58618).
 *
 * Node 20 still attaches that property, through two `util.deprecate` wrappers built on every call
 * (nodejs/node#58218, "`deprecate` shows increased use of CPU"; the fix is not in Node 20). Fastify
 * binds one callback per request that carries a body, so every `POST /messages` paid for it: about
 * a tenth of the operator's CPU per envelope under the accept benchmark. Nothing in Roost or its
 * dependencies reads the deprecated property.
 */
function bind(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) {
  if (typeof fn !== 'function') {
    throw Object.assign(new TypeError(`The "fn" argument must be of type function. Received ${typeof fn}`), {
      code: 'ERR_INVALID_ARG_TYPE',
    });
  }
  const runInScope = this.runInAsyncScope.bind(this);
  const bound =
    thisArg === undefined
      ? function (this: unknown, ...args: unknown[]) {
          return runInScope(fn, this, ...args);
        }
      : runInScope.bind(null, fn, thisArg);
  Object.defineProperty(bound, 'length', { configurable: true, enumerable: false, writable: false, value: fn.length });
  return bound;
}

/** True when this Node's `AsyncResource#bind` still attaches the deprecated property. */
export function asyncResourceBindIsDeprecatedKind(): boolean {
  return (
    Object.getOwnPropertyDescriptor(
      new AsyncResource('roost-probe').bind(() => undefined),
      'asyncResource',
    ) !== undefined
  );
}

/** Install `bind` above where this Node's bind still attaches the property (idempotent). */
export function useCurrentAsyncResourceBind(): void {
  if (asyncResourceBindIsDeprecatedKind()) (AsyncResource.prototype as { bind: unknown }).bind = bind;
}
