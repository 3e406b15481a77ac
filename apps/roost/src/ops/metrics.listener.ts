import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { InjectConfig, type Config } from '#config';
import { OpsService } from './ops.service';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The second listener (`ROOST_METRICS_PORT`, on `ROOST_HOST`): `/metrics`, `/healthz` and `/readyz`
 * on a port the Ingress never routes, for Prometheus (and probes, if a chart prefers). It listens
 * before the main port and closes last, so the scrape covers the whole drain. Not started with
 * `ROOST_METRICS_PORT=0`: `/metrics` is then served on the main port.
 */
@Injectable()
export class MetricsListener implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('metrics');
  private server: Server | undefined;

  constructor(
    @InjectConfig() private readonly config: Config,
    private readonly ops: OpsService,
  ) {}

  /** The bound port (the configured one; tests may read it). */
  get port(): number | undefined {
    const address = this.server?.address();
    return typeof address === 'object' && address !== null ? address.port : undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.metricsPort === 0) return;
    const server = createServer((request, response) => void this.answer(request, response));
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new Error(
            `ROOST_METRICS_PORT ${this.config.metricsPort} on ${this.config.host}: ${error.code ?? error.message}`,
          ),
        ),
      );
      server.listen(this.config.metricsPort, this.config.host, () => resolve());
    });
    server.on('error', (error) => this.logger.error(`metrics listener: ${error.message}`));
    this.server = server;
    this.logger.debug(`metrics listener on ${this.config.host}:${this.config.metricsPort}`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0];
    try {
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        return send(response, 405, JSON_TYPE, error('BAD_REQUEST', 'only GET'), { allow: 'GET, HEAD' });
      }
      if (path === '/metrics')
        return send(response, 200, 'text/plain; version=0.0.4; charset=utf-8', await this.ops.metricsText());
      if (path === '/healthz' || path === '/health')
        return send(response, 200, JSON_TYPE, JSON.stringify(this.ops.health()));
      if (path === '/readyz') {
        const readiness = await this.ops.readiness();
        return send(response, readiness.ok ? 200 : 503, JSON_TYPE, JSON.stringify(readiness));
      }
      send(response, 404, JSON_TYPE, error('NOT_FOUND', 'the metrics listener serves /metrics, /healthz and /readyz'));
    } catch (failure) {
      this.logger.error(`metrics listener ${path}: ${(failure as Error).message}`);
      send(response, 500, JSON_TYPE, error('INTERNAL_ERROR', 'internal error'));
    }
  }
}

const error = (code: string, message: string) => JSON.stringify({ error: { code, message } });

function send(
  response: ServerResponse,
  status: number,
  type: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (response.headersSent) return;
  response.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...headers });
  response.end(response.req.method === 'HEAD' ? undefined : body);
}
