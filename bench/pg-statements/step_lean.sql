\set held -1
WITH fence AS (SELECT lease_owner, lease_expires_at, fencing_token FROM agentic_runs WHERE run_id = :rid FOR SHARE)
INSERT INTO agentic_journal (run_id, seq, step)
SELECT :rid, nextval('stepseq'), '{"agent_path":"root/a3","delta":[["k3",3]],"invocation":{"agent":"a3","path":"root/a3","inputs":{},"output":3,"started_at_us":1733300000000000,"ended_at_us":1733300000000100,"attempt":1}}'::json
WHERE NOT EXISTS (SELECT 1 FROM fence WHERE NOT CASE WHEN :held::bigint >= 0 THEN lease_owner IS NOT DISTINCT FROM :owner AND fencing_token = :held::bigint
      ELSE lease_owner IS NULL OR lease_owner = :owner OR lease_expires_at <= now() END)
ON CONFLICT (run_id, seq) DO NOTHING RETURNING seq;
