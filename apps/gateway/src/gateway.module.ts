import { Module } from '@nestjs/common';
import { ConnectGateway } from './connect.gateway';
import { ConnectionsService } from './connections.service';

/** The gateway role: `/connect` WebSocket push over the frame bus. */
@Module({ providers: [ConnectGateway, ConnectionsService], exports: [ConnectionsService] })
export class GatewayModule {}
