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
           time from the moment all workers are ready (connected, set up, warmed up) to the last one's end;
           CPU over the same span: the workers' own (each its process time from "go" to its end) and the
           PostgreSQL server's (its postmaster and children, from /proc, when the server runs on this machine).
  group    M runs of an N-step chain all in flight at once in one process (`AsyncPostgresSaver`, a pool of
           --pool connections, durability sync; node i writes k{i} = i and notes when it starts): runs/s, the
           step latency (one node's start to the next one's in the same run; median and p99), and what the
           server committed meanwhile: write transactions (txid_current() before and after) and WAL flushes
           (pg_stat_wal.wal_sync, read after the statistics settle). The `group` scenario of agentic-bench
           counts its own runs the same way.

Prints one JSON object on stdout; progress on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import TypedDict

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph


def build(n: int, mark=None):
    """The chain of N nodes, node i returning {k{i}: i}; `mark(state)` is called as each node starts."""
    fields = {"input": int, **{f"k{i}": int for i in range(n)}}
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]

    def make(i: int):
        def node(state):
            if mark is not None:
                mark(state)
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

        cpu0 = time.process_time()
        await asyncio.gather(*(one(i) for i in range(first, first + count)))
        print(f"done {time.process_time() - cpu0}", flush=True)


def proc_ticks(pid: int) -> tuple[int, int, int] | None:
    """(ppid, own CPU ticks, waited-for children's CPU ticks) of process `pid` from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def postmaster_pid(url: str) -> int | None:
    """The PostgreSQL server's postmaster, when it runs on this machine: the parent of a backend."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    ticks = proc_ticks(backend)
    return ticks[0] if ticks else None


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and its children (live ones and those it waited for), as agentic-bench counts."""
    own = proc_ticks(pid)
    if own is None:
        return 0.0
    ticks = own[1] + own[2]
    for name in os.listdir("/proc"):
        if name.isdigit():
            t = proc_ticks(int(name))
            if t and t[0] == pid:
                ticks += t[1] + t[2]
    return ticks / os.sysconf("SC_CLK_TCK")


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
    pm = postmaster_pid(url)
    pg0 = tree_cpu_s(pm) if pm else None
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    workers_cpu = 0.0
    for p in procs:
        line = p.stdout.readline().strip()
        if not line.startswith("done ") or p.wait() != 0:
            fail(f"a worker failed (said {line!r}, exit {p.wait()})")
        workers_cpu += float(line.split()[1])
    wall = time.perf_counter() - t0
    pg_cpu = tree_cpu_s(pm) - pg0 if pm and pg0 is not None else None
    print(f"langgraph pg: {k} worker(s), {runs} runs: {runs / wall:.0f} runs/s", file=sys.stderr, flush=True)
    return {"workers": k, "runs": runs, "concurrency": concurrency, "wall_s": wall, "runs_per_s": runs / wall,
            "workers_cpu_s": workers_cpu, "pg_cpu_s": pg_cpu}


async def counters(url: str) -> tuple[int, int]:
    """(txid_current(), pg_stat_wal.wal_sync), after 1.1 s: backends report their statistics once a second."""
    import psycopg

    await asyncio.sleep(1.1)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT txid_current()::bigint, (SELECT wal_sync FROM pg_stat_wal)::bigint")
        xid, syncs = await cur.fetchone()
    return int(xid), int(syncs)


def quantile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank quantile (as agentic-bench's `serve::quantile`)."""
    rank = min(max(1, math.ceil(q * len(sorted_values))), len(sorted_values))
    return sorted_values[rank - 1]


async def group_main(url: str, runs: int, steps: int, pool_size: int) -> dict:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    marks: dict[int, list[float]] = {}
    g = build(steps, lambda state: marks.setdefault(state["input"], []).append(time.perf_counter()))
    async with AsyncConnectionPool(url, min_size=pool_size, max_size=pool_size, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0,
                                           "row_factory": dict_row}) as pool:
        app = g.compile(checkpointer=AsyncPostgresSaver(pool))
        tag = f"{os.getpid()}-{time.time_ns()}"
        cfg = lambda i: {"configurable": {"thread_id": f"group-{tag}-{i}"}, "recursion_limit": steps + 10}
        for w in range(3):
            await app.ainvoke({"input": runs + w}, cfg(runs + w), durability="sync")
        before = await counters(url)
        t0 = time.perf_counter()
        outs = await asyncio.gather(*(app.ainvoke({"input": i}, cfg(i), durability="sync") for i in range(runs)))
        wall = time.perf_counter() - t0
        after = await counters(url)
    for i, out in enumerate(outs):
        assert out["input"] == i and out[f"k{steps - 1}"] == steps - 1 and len(out) == steps + 1, out
    lat = sorted(b - a for i in range(runs) for a, b in zip(marks[i], marks[i][1:]))
    assert all(len(marks[i]) == steps for i in range(runs))
    xacts, syncs = after[0] - before[0] - 1, after[1] - before[1]
    print(f"langgraph pg group: {runs} x {steps} steps in {wall:.2f} s, {xacts} write transactions, "
          f"{syncs} WAL flushes", file=sys.stderr, flush=True)
    return {"runs": runs, "steps": steps, "pool": pool_size, "wall_s": wall, "runs_per_s": runs / wall,
            "write_xacts": xacts, "wal_syncs": syncs, "step_p50_ms": quantile(lat, 0.5) * 1e3,
            "step_p99_ms": quantile(lat, 0.99) * 1e3}


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
    gr = sub.add_parser("group")
    gr.add_argument("--url", required=True)
    gr.add_argument("--runs", type=int, default=1000)
    gr.add_argument("--steps", type=int, default=10)
    gr.add_argument("--pool", type=int, default=20)
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
    elif a.cmd == "group":
        result = asyncio.run(group_main(a.url, a.runs, a.steps, a.pool))
    else:
        asyncio.run(worker_main(a.url, a.first, a.count, a.inflight))
        return
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
