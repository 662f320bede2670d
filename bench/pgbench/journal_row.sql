\set s random(1, 1000000000)
INSERT INTO agentic_journal (run_id, seq, step) VALUES ('run-1', :s, '{"p":"root/0","d":[["k0",42]],"s":[{"path":"root","state":{"next":0}}],"i":{"n":"a0","o":42,"t":1700000000000420,"u":5},"x":"padpadpadpadpadpadpadpadpadpadpadpadpadpadpad"}'::json) ON CONFLICT (run_id, seq) DO NOTHING RETURNING seq;
