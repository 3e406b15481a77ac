import { Module } from '@nestjs/common';
import { ConnectGateway } from './connect.gateway';
import { ConnectionsService } from './connections.service';
import { SocketLeases } from './socket-leases';

/** The gateway role: `/connect` WebSocket push over the frame bus. */
@Module({ providers: [ConnectGateway, ConnectionsService, SocketLeases], exports: [ConnectionsService, SocketLeases] })
export class GatewayModule {}
