\set held -1
INSERT INTO agentic_journal (run_id, seq, step) VALUES (:rid, nextval('stepseq'), '{"agent_path":"root/a3","delta":[["k3",3]],"invocation":{"agent":"a3","path":"root/a3","inputs":{},"output":3,"started_at_us":1733300000000000,"ended_at_us":1733300000000100,"attempt":1}}'::json);
