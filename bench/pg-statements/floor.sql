INSERT INTO bench_floor (payload) VALUES (repeat('x', 190));
