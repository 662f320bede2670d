-- Our schema (store/src/postgres.rs), a floor table and one run row without a lease.
DROP TABLE IF EXISTS agentic_runs, agentic_journal, bench_floor;
CREATE TABLE agentic_runs (run_id text PRIMARY KEY, record json NOT NULL, status text NOT NULL, updated_at_ms bigint NOT NULL,
  lease_owner text, lease_expires_at timestamptz, fencing_token bigint NOT NULL DEFAULT 0, cancel_requested_at timestamptz);
CREATE INDEX agentic_runs_updated ON agentic_runs (updated_at_ms DESC, run_id);
CREATE TABLE agentic_journal (run_id text NOT NULL, seq bigint NOT NULL, step json NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE bench_floor (id bigserial PRIMARY KEY, payload text NOT NULL);
CREATE SEQUENCE IF NOT EXISTS stepseq;
INSERT INTO agentic_runs VALUES ('r1', '{}', 'running', 0, NULL, NULL, 0, NULL);
