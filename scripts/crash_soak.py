#!/usr/bin/env python3
"""Randomized crash soak for durable runs (the large version of tests/cli_crash.rs).

Generates random nested workflows (sequence / parallel / loop / conditional / parallel_mapper over compute
agents), runs each once uncrashed, then runs it again while killing the process with SIGKILL after random
steps (AGENTIC_TEST_KILL_AFTER_STEP), resuming in a new process each time, possibly crashing the resume too.
Checks that the final output, state and per-agent completion counts equal the uncrashed run's.

    cargo build --release && python3 scripts/crash_soak.py --binary target/release/agentic --workflows 50

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

    def leaf(reads):
        n = name("c")
        key = f"k_{n}"
        if reads:
            src = " ~ '|' ~ ".join(f"({r} | string)" for r in reads[-2:])
            agents[n] = {"kind": "compute", "value": f"'{n}(' ~ {src} ~ ')'", "output_key": key}
        else:
            agents[n] = {"kind": "compute", "value": f"'{n}'", "output_key": key}
        return n, [key]

    def composite(depth, reads):
        if depth >= max_depth or rng.random() < 0.3:
            return leaf(reads)
        kind = rng.choice(["sequence", "sequence", "parallel", "loop", "conditional"])
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
    env = dict(os.environ, AGENTIC_STORE=store)
    env.pop("AGENTIC_TEST_KILL_AFTER_STEP", None)
    if kill_after is not None:
        env["AGENTIC_TEST_KILL_AFTER_STEP"] = str(kill_after)
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=120)


def show(binary, store, run_id):
    return json.loads(run(binary, store, ["show", run_id, "--json"]).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/agentic")
    ap.add_argument("--workflows", type=int, default=20)
    ap.add_argument("--crashes", type=int, default=3, help="kills per workflow (each resume may crash again)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(a.workflows):
            spec = gen_workflow(rng)
            path = os.path.join(tmp, f"w{w}.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            store = os.path.join(tmp, f"store{w}")
            clean = run(a.binary, store, ["run", path, "--memory-id", "clean"])
            if clean.returncode != 0:
                print(f"workflow {w}: clean run failed: {clean.stderr}\n{json.dumps(spec)}")
                return 1
            reference = show(a.binary, store, "clean")
            steps = reference["steps"]
            crashed_at = sorted(rng.sample(range(1, steps + 1), min(a.crashes, steps)))
            args = ["run", path, "--memory-id", "soak"]
            for k in crashed_at:
                p = run(a.binary, store, args, kill_after=k)
                if p.returncode >= 0 and k < steps:
                    print(f"workflow {w}: expected a kill after step {k}, got exit {p.returncode}: {p.stderr}")
                    return 1
                args = ["resume", "soak"]
            final = run(a.binary, store, ["resume", "soak"] if crashed_at else args)
            got = show(a.binary, store, "soak")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
