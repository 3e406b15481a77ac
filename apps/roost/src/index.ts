export { ensureAdminToken } from './admin-token';
export { buildRoostApp, type RoostApp } from './bootstrap';
