import { CliError, EXIT } from '../output';
import type { Session } from '../session';
import type { ServeOptions } from './serve';

/**
 * `roost serve` in the standalone `@roost/cli` package (apps/cli/build.mjs puts this module in
 * place of ./serve): the package carries the client side only, not the operator and its database
 * and queue drivers, so it says where the operator comes from instead.
 */
export async function serve(_session: Session, _options: ServeOptions): Promise<void> {
  throw new CliError(
    'this roost was installed from the @roost/cli package, which does not include the operator',
    EXIT.USAGE,
    'run the operator from the Roost repository (`npm start`, or `npm run roost -- serve`) or its Docker image / Helm chart, and point this CLI at it with `roost config profile <name> --url <url>`',
  );
}
