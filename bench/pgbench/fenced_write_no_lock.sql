\set s random(1, 1000000000)
WITH fence AS (SELECT lease_owner, lease_expires_at, fencing_token FROM agentic_runs WHERE run_id = 'run-1')
INSERT INTO agentic_journal (run_id, seq, step) SELECT 'run-1', :s, '{"p":"root/0","d":[["k0",42]],"s":[{"path":"root","state":{"next":0}}],"i":{"n":"a0","o":42,"t":1700000000000420,"u":5},"x":"padpadpadpadpadpadpadpadpadpadpadpadpadpadpad"}'::json
WHERE NOT EXISTS (SELECT 1 FROM fence WHERE NOT CASE WHEN 1::bigint >= 0 THEN lease_owner IS NOT DISTINCT FROM 'me' AND fencing_token = 1::bigint ELSE lease_owner IS NULL OR lease_owner = 'me' OR lease_expires_at <= now() END)
ON CONFLICT (run_id, seq) DO NOTHING RETURNING seq;
