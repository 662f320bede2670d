#!/usr/bin/env python3
"""Randomized crash soak for durable runs (the large version of tests/process/cli_crash.rs).

Generates random nested workflows (sequence / parallel / loop / conditional / parallel_mapper, over compute
agents, some of them async, and human steps), runs each once uncrashed (answering every human step), then runs
it again while killing the process with SIGKILL after random steps (AGENTIC_TEST_KILL_AFTER_STEP), resuming in
a new process each time (answering what it asks), possibly crashing the resume too. Checks that the final
output, state and per-agent completion counts equal the uncrashed run's: no completed step runs again, none is
lost.

    cargo build --release && python3 scripts/crash_soak.py --binary target/release/agentic --workflows 50
    python3 scripts/crash_soak.py --store postgres://USER@HOST:PORT/DB   # on PostgreSQL (one database)

Exit status 0 when every workflow matched; the first mismatch is printed with its spec and seed.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter


def gen_workflow(rng, max_depth=4):
    agents = {}
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def leaf(reads, item=None):
        if item is None and rng.random() < 0.12:
            n = name("h")
            key = f"k_{n}"
            agents[n] = {"kind": "human", "prompt": f"answer {n}", "response_id": n, "output_key": key}
            return n, [key]
        n = name("c")
        key = f"k_{n}"
        sources = [f"({r} | string)" for r in reads[-2:]] + ([f"({item} | string)"] if item else [])
        if sources:
            agents[n] = {"kind": "compute", "value": f"'{n}(' ~ " + " ~ '|' ~ ".join(sources) + " ~ ')'",
                         "output_key": key}
        else:
            agents[n] = {"kind": "compute", "value": f"'{n}'", "output_key": key}
        if item:
            agents[n]["inputs"] = [item]
        # Async only where something reads its key in the same sequence (a reader waits for it).
        if rng.random() < 0.2:
            agents[n]["async"] = True
        return n, [key]

    def mapper(depth, reads):
        """A compute agent giving a list, then a mapper over it whose item agent is a leaf or a sequence."""
        items = name("items")
        agents[items] = {"kind": "compute", "value": str(list(range(rng.randint(1, 4)))), "output_key": f"k_{items}"}
        item_key = f"x_{items}"
        if depth + 1 < max_depth and rng.random() < 0.5:
            each = name("seq")
            first, keys = leaf([], item_key)
            second, more = leaf(keys, item_key)
            agents[each] = {"kind": "sequence", "agents": [first, second], "output_key": more[0]}
        else:
            each, _ = leaf([], item_key)
        m = name("map")
        agents[m] = {"kind": "parallel_mapper", "agent": each, "items": f"k_{items}", "item_key": item_key,
                     "max_concurrency": rng.randint(1, 3), "output_key": f"k_{m}"}
        seq = name("seq")
        agents[seq] = {"kind": "sequence", "agents": [items, m]}
        return seq, [f"k_{m}"]

    def composite(depth, reads):
        if depth >= max_depth or rng.random() < 0.3:
            return leaf(reads)
        kind = rng.choice(["sequence", "sequence", "parallel", "loop", "conditional", "mapper"])
        if kind == "mapper":
            return mapper(depth, reads)
        n = name(kind[:3])
        children, produced = [], []
        for _ in range(rng.randint(1, 3)):
            child, keys = composite(depth + 1, reads + (produced if kind != "parallel" else []))
            children.append(child)
            produced += keys
        if kind == "conditional":
            agents[n] = {"kind": "conditional", "branches": [{"when": "true", "agents": children}]}
        elif kind == "loop":
            agents[n] = {"kind": "loop", "agents": children, "max_iterations": rng.randint(1, 3)}
        else:
            agents[n] = {"kind": kind, "agents": children}
        return n, produced

    root, keys = composite(0, [])
    if agents[root]["kind"] == "compute":
        agents = {"main": {"kind": "sequence", "agents": [root]}, **agents}
        root = "main"
    return {"version": 1, "root": root, "agents": agents}


def run(binary, store, args, kill_after=None):
    # Short leases: a resume after a kill on PostgreSQL waits for the dead process's lease to expire.
    env = dict(os.environ, AGENTIC_STORE=store, AGENTIC_LEASE_MS="300")
    env.pop("AGENTIC_TEST_KILL_AFTER_STEP", None)
    if kill_after is not None:
        env["AGENTIC_TEST_KILL_AFTER_STEP"] = str(kill_after)
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=120)


def show(binary, store, run_id):
    return json.loads(run(binary, store, ["show", run_id, "--json"]).stdout)


def finish(binary, store, run_id, p, kill_after=None):
    """Answers every human step the run asks for (`exit 2`) and resumes it until it ends; returns the last
    process. A kill point applies to the first resume only."""
    for _ in range(50):
        if p.returncode != 2:
            return p
        for pending in show(binary, store, run_id)["pending"]:
            run(binary, store, ["respond", run_id, pending["id"], f"ok-{pending['id']}"])
        p = run(binary, store, ["resume", run_id], kill_after)
        kill_after = None
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/agentic")
    ap.add_argument("--workflows", type=int, default=20)
    ap.add_argument("--crashes", type=int, default=3, help="kills per workflow (each resume may crash again)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", help="a PostgreSQL URL (default: a sled store per workflow in a temp dir)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    total_kills = 0
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(a.workflows):
            spec = gen_workflow(rng)
            path = os.path.join(tmp, f"w{w}.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            store = a.store or os.path.join(tmp, f"store{w}")
            clean_id, soak_id = f"clean-{a.seed}-{w}", f"soak-{a.seed}-{w}"
            clean = finish(a.binary, store, clean_id, run(a.binary, store, ["run", path, "--memory-id", clean_id]))
            if clean.returncode != 0:
                print(f"workflow {w}: clean run failed: {clean.stderr}\n{json.dumps(spec)}")
                return 1
            reference = show(a.binary, store, clean_id)
            steps = reference["steps"]
            crashed_at = sorted(rng.sample(range(1, steps + 1), min(a.crashes, steps)))
            p = None
            for k in crashed_at:
                args = ["run", path, "--memory-id", soak_id] if p is None else ["resume", soak_id]
                p = run(a.binary, store, args, kill_after=k)
                # Suspended before step k: answered, and the kill applies to the resume.
                p = finish(a.binary, store, soak_id, p, kill_after=k)
                total_kills += p.returncode < 0
            if p is None:
                p = run(a.binary, store, ["run", path, "--memory-id", soak_id])
            final = finish(a.binary, store, soak_id, run(a.binary, store, ["resume", soak_id]) if p.returncode < 0 else p)
            got = show(a.binary, store, soak_id)
            counts = lambda s: Counter(h["path"] for h in s["history"])
            problems = []
            if final.returncode != 0 or final.stdout != clean.stdout:
                problems.append(f"output {final.stdout!r} (exit {final.returncode}) != {clean.stdout!r}")
            if got["state"] != reference["state"]:
                problems.append("state differs")
            if counts(got) != counts(reference):
                problems.append(f"completions differ: {counts(got) - counts(reference)} extra")
            if problems:
                print(f"workflow {w} (seed {a.seed}, kills after {crashed_at}): " + "; ".join(problems))
                print(json.dumps(spec, indent=1))
                return 1
            print(f"workflow {w}: {len(spec['agents'])} agents, {steps} steps, killed after {crashed_at}: ok")
    print(f"{a.workflows} workflows, {total_kills} kills: every resumed run equals its uncrashed run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
