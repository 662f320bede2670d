\set held -1
\set s random(1, 1000000000)
WITH fence AS (
  SELECT r.run_id, r.lease_owner, r.lease_expires_at, r.fencing_token, f.held
  FROM agentic_runs r JOIN unnest(ARRAY[:rid]::text[], ARRAY[-1]::bigint[]) AS f(run_id, held) ON r.run_id = f.run_id
  FOR SHARE OF r
), lost AS (
  SELECT run_id, lease_owner, fencing_token, held FROM fence
  WHERE NOT CASE WHEN held >= 0 THEN lease_owner IS NOT DISTINCT FROM :owner AND fencing_token = held
      ELSE lease_owner IS NULL OR lease_owner = :owner OR lease_expires_at <= now() END
), journal AS (
  INSERT INTO agentic_journal (run_id, seq, step)
  SELECT * FROM unnest(ARRAY[:rid]::text[], ARRAY[nextval('stepseq')]::bigint[], ARRAY['{"agent_path":"root/a3","delta":[["k3",3]],"invocation":{"agent":"a3","path":"root/a3","inputs":{},"output":3,"started_at_us":1733300000000000,"ended_at_us":1733300000000100,"attempt":1}}'::json]::json[])
  WHERE NOT EXISTS (SELECT 1 FROM lost)
  ON CONFLICT (run_id, seq) DO NOTHING RETURNING run_id, seq
), runs AS (
  INSERT INTO agentic_runs (run_id, record, status, updated_at_ms, lease_owner, lease_expires_at, fencing_token)
  SELECT u.run_id, u.record, u.status, u.updated, NULL, NULL, 0
  FROM unnest(ARRAY[]::text[], ARRAY[]::json[], ARRAY[]::text[], ARRAY[]::bigint[], ARRAY[]::bigint[]) AS u(run_id, record, status, updated, held)
  WHERE NOT EXISTS (SELECT 1 FROM lost)
  ON CONFLICT (run_id) DO UPDATE SET record = excluded.record, status = excluded.status, updated_at_ms = excluded.updated_at_ms
)
SELECT 0, run_id, seq, NULL::text, NULL::bigint FROM journal
UNION ALL SELECT 1, run_id, fencing_token, lease_owner, held FROM lost;
