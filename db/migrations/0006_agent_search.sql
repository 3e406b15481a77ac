-- The console's agent search (docs/console-api.md): `GET /_admin/agents?q=` matches a substring
-- of the handle or the display name (ILIKE '%q%'). Without an index a needle that few agents
-- match reads the whole agents table; trigram GIN indexes answer it from the index (10,000
-- agents: ~0.1 ms instead of a full scan). pg_trgm is a trusted extension (PostgreSQL 13+): the
-- database owner may create it; the embedded PGlite loads it at start. No pending list
-- (fastupdate off): agents are created rarely, and a pending list (scanned whole by every search,
-- until vacuum) made the planner fall back to a full scan after a bulk import.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX agents_search ON agents USING gin (handle gin_trgm_ops, display_name gin_trgm_ops) WITH (fastupdate = off);
