"""LangGraph on PostgreSQL, for the `pg` scenario of `agentic-bench` (docs/performance.md).

Two measurements against one PostgreSQL server (the URL is the database to use; the tables of
`langgraph-checkpoint-postgres` are created by `setup()` before any timer starts):

  seq      the chain of `bench_seq.py` (START -> n0 -> ... -> n{N-1} -> END, node i returns {k{i}: i}) with
           `PostgresSaver` and durability sync / async / exit; a fresh thread per repetition; per step =
           invoke wall time / N, median over the repetitions. Each run is checked: k{N-1} = N-1, N+1 keys, and
           the thread's saved state reads back finished with the same last key.
  workers  K worker processes on the same database, each running its share of M runs of the 5-step chain
           (input = the run's number, node i writes k{i} = i) with `AsyncPostgresSaver` (a connection pool per
           process) and durability sync, C/K runs in flight per process (asyncio). Throughput = M / the wall
           time from the moment all workers are ready (connected, set up, warmed up) to the last one's end.

Prints one JSON object on stdout; progress on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import TypedDict

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph


def build(n: int):
    fields = {"input": int, **{f"k{i}": int for i in range(n)}}
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]

    def make(i: int):
        def node(state):
            return {f"k{i}": i}

        return node

    g = StateGraph(State)
    for i in range(n):
        g.add_node(f"n{i}", make(i))
    g.add_edge(START, "n0")
    for i in range(n - 1):
        g.add_edge(f"n{i}", f"n{i + 1}")
    g.add_edge(f"n{n - 1}", END)
    return g


def seq(url: str, ns: list[int], durabilities: list[str], reps: int) -> dict:
    rows = []
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        for n in ns:
            app = build(n).compile(checkpointer=saver)
            # warm-up: first statements prepared, first thread written
            app.invoke({"input": 1}, {"configurable": {"thread_id": f"warm-{n}"}, "recursion_limit": n + 10})
            for durability in durabilities:
                times = []
                for rep in range(reps):
                    cfg = {"configurable": {"thread_id": f"seq-{n}-{durability}-{rep}-{time.time_ns()}"},
                           "recursion_limit": n + 10}
                    t0 = time.perf_counter()
                    out = app.invoke({"input": 1}, cfg, durability=durability)
                    times.append(time.perf_counter() - t0)
                    assert out[f"k{n - 1}"] == n - 1 and len(out) == n + 1, out
                    snap = app.get_state(cfg)
                    assert not snap.next and snap.values[f"k{n - 1}"] == n - 1
                med = statistics.median(times)
                rows.append({"n": n, "durability": durability, "reps": reps, "run_ms_median": med * 1e3,
                             "per_step_us_median": med / n * 1e6})
                print(f"langgraph pg: N={n} {durability}: {med / n * 1e6:.1f} us/step", file=sys.stderr, flush=True)
    return {"seq": rows}


async def worker_main(url: str, first: int, count: int, inflight: int) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(url, max_size=max(1, min(inflight, 20)), open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0,
                                           "row_factory": dict_row}) as pool:
        saver = AsyncPostgresSaver(pool)  # the parent ran setup() (concurrent setups race on the migrations)
        app = build(5).compile(checkpointer=saver)
        tag = f"{os.getpid()}-{time.time_ns()}"
        for w in range(3):
            await app.ainvoke({"input": -1}, {"configurable": {"thread_id": f"warm-{tag}-{w}"}}, durability="sync")
        print("ready", flush=True)
        sys.stdin.readline()  # "go"
        sem = asyncio.Semaphore(max(1, inflight))

        async def one(i: int) -> None:
            async with sem:
                out = await app.ainvoke({"input": i}, {"configurable": {"thread_id": f"run-{tag}-{i}"}},
                                        durability="sync")
                assert out["input"] == i and out["k4"] == 4, out

        await asyncio.gather(*(one(i) for i in range(first, first + count)))
        print("done", flush=True)


def workers(url: str, k: int, runs: int, concurrency: int) -> dict:
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    share = [runs // k + (1 if w < runs % k else 0) for w in range(k)]
    procs = []
    first = 0
    for w in range(k):
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "worker", "--url", url, "--first", str(first), "--count", str(share[w]),
             "--inflight", str(max(1, concurrency // k))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        first += share[w]
    def fail(why: str) -> None:
        for p in procs:
            p.kill()
        raise SystemExit(why)

    for p in procs:
        line = p.stdout.readline().strip()
        if line != "ready":
            fail(f"a worker did not start (said {line!r}, exit {p.wait()})")
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        line = p.stdout.readline().strip()
        if line != "done" or p.wait() != 0:
            fail(f"a worker failed (said {line!r}, exit {p.wait()})")
    wall = time.perf_counter() - t0
    print(f"langgraph pg: {k} worker(s), {runs} runs: {runs / wall:.0f} runs/s", file=sys.stderr, flush=True)
    return {"workers": k, "runs": runs, "concurrency": concurrency, "wall_s": wall, "runs_per_s": runs / wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("seq")
    s.add_argument("--url", required=True)
    s.add_argument("--ns", default="10,100")
    s.add_argument("--durabilities", default="sync,async,exit")
    s.add_argument("--reps", type=int, default=5)
    w = sub.add_parser("workers")
    w.add_argument("--url", required=True)
    w.add_argument("--k", type=int, default=1)
    w.add_argument("--runs", type=int, default=300)
    w.add_argument("--concurrency", type=int, default=30)
    one = sub.add_parser("worker")
    one.add_argument("--url", required=True)
    one.add_argument("--first", type=int, required=True)
    one.add_argument("--count", type=int, required=True)
    one.add_argument("--inflight", type=int, required=True)
    a = ap.parse_args()
    if a.cmd == "seq":
        result = seq(a.url, [int(x) for x in a.ns.split(",")], a.durabilities.split(","), a.reps)
    elif a.cmd == "workers":
        result = workers(a.url, a.k, a.runs, a.concurrency)
    else:
        asyncio.run(worker_main(a.url, a.first, a.count, a.inflight))
        return
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
