export { GatewayModule } from './gateway.module';
export { RoostWsAdapter } from './ws-adapter';
