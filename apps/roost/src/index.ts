export { ensureAdminToken } from './admin-token';
export { buildRoostApp, DRAIN_HOLD_OPEN_MS, type RoostApp } from './bootstrap';
