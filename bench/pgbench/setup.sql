-- The tables of the store (schema 5) that a step writes, and the floor's, for scripts/pg-statement-cost.sh.
DROP TABLE IF EXISTS bench_floor, agentic_runs, agentic_journal;
CREATE TABLE bench_floor (id bigserial PRIMARY KEY, payload text NOT NULL);
CREATE TABLE agentic_runs (run_id text PRIMARY KEY, record json NOT NULL, status text NOT NULL, updated_at_ms bigint NOT NULL, lease_owner text, lease_expires_at timestamptz, fencing_token bigint NOT NULL DEFAULT 0);
CREATE INDEX agentic_runs_updated ON agentic_runs (updated_at_ms DESC, run_id);
CREATE INDEX agentic_runs_open ON agentic_runs (status, lease_expires_at) WHERE status IN ('running', 'suspended');
CREATE TABLE agentic_journal (run_id text NOT NULL, seq bigint NOT NULL, step json NOT NULL, PRIMARY KEY (run_id, seq));
INSERT INTO agentic_runs VALUES ('run-1', '{}', 'running', 0, 'me', now() + interval '1 hour', 1);
