-- The mailbox entries' parent check (roost_entries_check_parents, migrations 0007 and 0008) runs two
-- queries per accept statement, each over an array of the statement's mailbox or envelope ids. With
-- Postgres's default plan_cache_mode (auto) a plpgsql query with parameters gets a custom plan, made
-- anew at every execution, as long as its estimated cost is lower than the generic plan's: for an
-- array of fewer than ten ids (the planner's guess for an array it cannot see) it always is. So an
-- accept statement of one envelope (what an operator not under load commits for every send) planned
-- both queries again every time: about a tenth of the statement's Postgres CPU. The generic plan is
-- the same index lookup (the function already forbids sequential scans), made once per connection.
-- The setting holds only while the function runs. No row changes.
ALTER FUNCTION roost_entries_check_parents() SET plan_cache_mode = force_generic_plan;
