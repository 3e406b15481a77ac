import { WebSocketGateway, type OnGatewayConnection } from '@nestjs/websockets';
import type { WebSocket } from 'ws';
import { CLOSE_CODES } from '#domain';
import { ConnectionsService } from './connections.service';
import { CONNECT_PATH, type ConnectRequest } from './ws-adapter';

/** `GET /connect` (ASMTP.md §6): authenticated before the upgrade by `RoostWsAdapter`. */
@WebSocketGateway({ path: CONNECT_PATH })
export class ConnectGateway implements OnGatewayConnection {
  constructor(private readonly connections: ConnectionsService) {}

  handleConnection(ws: WebSocket, request: ConnectRequest): void {
    if (!request.roost) {
      ws.close(CLOSE_CODES.unauthenticated, 'unauthenticated');
      return;
    }
    this.connections.open(ws, request.roost);
  }
}
