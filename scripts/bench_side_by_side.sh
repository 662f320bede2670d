#!/usr/bin/env bash
# Side by side on THIS machine: the LangGraph baseline harness (../shared/bench/langgraph) and our durable
# benches, back to back, then ONE table: scenario | LangGraph | ours | ratio (LangGraph / ours: >1 = ours is
# faster or smaller).
#
# Usage: scripts/bench_side_by_side.sh            (~10-20 min on 2 cores)
# Env:   LG_HARNESS  the harness directory   (default: /work/shared/bench/langgraph)
#        LG_VENV     its virtualenv          (default: /tmp/lg-venv; created from requirements.txt if missing)
#        OUT         where results go        (default: /tmp/bench-side-by-side; must be on the disk under test)
#        REPS_SEQ    LangGraph seq reps      (default 3)
#        REPS_RESUME LangGraph resume reps   (default 5); ours use 4x as many (a run costs ms, not s)
#
# What runs (docs/performance.md explains each row):
#   LangGraph: bench_seq.py N=100,1000 distinct keys, ckpts none, memory, sqlite:sync, sqlite:async,
#              sqlite:exit; bench_resume.py (process B = cold resume, spawn -> exit); fsync_probe.py.
#   ours:      cargo bench --bench durable (same chain, no store / MemoryStore / SledStore sync, async, exit);
#              `agentic resume` of a suspended [compute, human, compute] run as a whole process (spawn ->
#              exit, the store copy is made before the clock starts), alone and after `agentic respond`.
#   floor:     100-byte append + fdatasync, and + sync_file_range (what sled's flush issues), in $OUT.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LG_HARNESS="${LG_HARNESS:-/work/shared/bench/langgraph}"
LG_VENV="${LG_VENV:-/tmp/lg-venv}"
OUT="${OUT:-/tmp/bench-side-by-side}"
REPS_SEQ="${REPS_SEQ:-3}"
REPS_RESUME="${REPS_RESUME:-5}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"

load() { echo "$(date -u +%H:%M:%S) loadavg $(cut -d' ' -f1-3 /proc/loadavg) ($1)" | tee -a "$OUT/loadavg.txt"; }

mkdir -p "$OUT"
: > "$OUT/loadavg.txt"
if [ ! -x "$LG_VENV/bin/python" ]; then
  python3 -m venv "$LG_VENV"
  "$LG_VENV/bin/pip" install -q -r "$LG_HARNESS/requirements.txt"
fi
PY="$LG_VENV/bin/python"

# The harness writes results/ and tmp/ next to its scripts (its directory may be read-only): run a copy.
LG="$OUT/langgraph"
rm -rf "$LG"
mkdir -p "$LG"
cp "$LG_HARNESS"/*.py "$LG/"
echo "disk: LangGraph files in $OUT on $(df --output=source "$OUT" | tail -1), our stores in ${TMPDIR:-/tmp} on $(df --output=source "${TMPDIR:-/tmp}" | tail -1)"

# Build first, so the compile does not load the machine during the LangGraph runs.
(cd "$ROOT" && cargo build --release --quiet && cargo bench --bench durable --no-run --quiet)

load "start, LangGraph"
(cd "$LG" && "$PY" bench_seq.py --ns 100,1000 --variants distinct \
  --ckpts none,memory,sqlite:sync,sqlite:async,sqlite:exit --reps "$REPS_SEQ" --out seq) | tee "$OUT/lg-seq.log"
(cd "$LG" && "$PY" bench_resume.py --reps "$REPS_RESUME" --out resume) | tee "$OUT/lg-resume.log"
(cd "$LG" && "$PY" fsync_probe.py) | tee "$OUT/lg-fsync.log"

load "ours: cargo bench --bench durable"
(cd "$ROOT" && cargo bench --bench durable) 2> >(tee "$OUT/ours-durable.stderr" >&2) | tee "$OUT/ours-durable.log"

load "ours: resume"
RES="$OUT/resume"
rm -rf "$RES"
mkdir -p "$RES"
cp "$ROOT/tests/fixtures/approval.yaml" "$RES/approval.yaml"
BIN="$TARGET/release/agentic"
(cd "$RES" && { "$BIN" run approval.yaml --input input=hello --store tpl-suspended --memory-id r || [ $? -eq 2 ]; })
cp -a "$RES/tpl-suspended" "$RES/tpl-answered"
(cd "$RES" && "$BIN" respond r human-review APPROVED --store tpl-answered)
"$PY" - "$BIN" "$RES" "$((REPS_RESUME * 4))" > "$OUT/ours-resume.json" <<'EOF'
import json, shutil, statistics, subprocess, sys, time
bin_, res, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
def proc(args):
    t = time.perf_counter()
    p = subprocess.run(args, cwd=res, capture_output=True, text=True)
    return time.perf_counter() - t, p
def fresh(tpl):
    d = f"{res}/run"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(f"{res}/{tpl}", d)
    return "run"
resume, both = [], []
for rep in range(-1, reps):  # rep -1: warm-up (page cache)
    d = fresh("tpl-answered")
    t, p = proc([bin_, "resume", "r", "--store", d])
    assert p.returncode == 0 and "Final: PROCESSED: hello | APPROVED" in p.stdout, (p.stdout, p.stderr)
    d = fresh("tpl-suspended")
    t1, p1 = proc([bin_, "respond", "r", "human-review", "APPROVED", "--store", d])
    t2, p2 = proc([bin_, "resume", "r", "--store", d])
    assert p1.returncode == 0 and p2.returncode == 0 and "APPROVED" in p2.stdout, (p1.stderr, p2.stderr)
    if rep >= 0:
        resume.append(t * 1e3)
        both.append((t1 + t2) * 1e3)
med = statistics.median
print(json.dumps({"reps": reps, "resume_ms_median": med(resume), "resume_ms_min": min(resume),
                  "resume_ms_max": max(resume), "respond_resume_ms_median": med(both),
                  "resume_ms_all": resume, "respond_resume_ms_all": both}))
EOF
cat "$OUT/ours-resume.json"

# The floor sled's flush actually pays: it issues sync_file_range (no device cache flush), not fsync.
"$PY" - "$OUT" > "$OUT/floor.json" <<'EOF'
import ctypes, json, os, statistics, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
WAIT_BEFORE_WRITE_WAIT_AFTER = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER, as sled calls it
def sync_file_range(fd, off):
    if libc.sync_file_range(fd, off, 100, WAIT_BEFORE_WRITE_WAIT_AFTER) != 0:
        raise OSError(ctypes.get_errno(), "sync_file_range")
p = os.path.join(sys.argv[1], "floor.bin")
def probe(sync):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    lat, off = [], 0
    for _ in range(200):
        t = time.perf_counter(); os.write(fd, b"x" * 100); sync(fd, off); lat.append(time.perf_counter() - t); off += 100
    os.close(fd); os.remove(p)
    return statistics.median(lat) * 1e6
print(json.dumps({"fdatasync_100b_us": probe(lambda fd, off: os.fdatasync(fd)),
                  "sync_file_range_100b_us": probe(sync_file_range)}))
EOF
cat "$OUT/floor.json"
load "end"

"$PY" - "$OUT" "$TARGET" > "$OUT/table.md" <<'EOF'
import json, os, re, sys
out, target = sys.argv[1], sys.argv[2]
lg = json.load(open(f"{out}/langgraph/results/seq.json"))
lg_rows = {(r["n"], r["checkpointer"], r["durability"]): r for r in lg["rows"]}
lg_res = json.load(open(f"{out}/langgraph/results/resume.json"))["median_ms"]
lg_fs = json.load(open(f"{out}/langgraph/results/fsync-probe.json"))
ours_res = json.load(open(f"{out}/ours-resume.json"))
floor = json.load(open(f"{out}/floor.json"))
err = open(f"{out}/ours-durable.stderr").read()
def ours_ns(n, name):
    e = json.load(open(f"{target}/criterion/durable_seq_{n}/{name}/{n}/new/estimates.json"))
    return e["median"]["point_estimate"]
def fmt(x, unit):
    return f"{x:,.1f} {unit}" if x < 100 else f"{x:,.0f} {unit}"
rows = []
pairs = [("none", "-", "none"), ("memory", "async (default)", "memory"), ("sqlite", "sync", "sled_sync"),
         ("sqlite", "async", "sled_async"), ("sqlite", "exit", "sled_exit")]
for n in (100, 1000):
    for ck, dur, ours in pairs:
        r = lg_rows[(n, ck, dur)]
        a, b = r["per_step_us_median"], ours_ns(n, ours) / n / 1e3
        label = ck if ck in ("none", "memory") else f"{ck} {dur} vs {ours}"
        rows.append((f"seq N={n}, per step: {label}", fmt(a, "us"), fmt(b, "us"), a / b))
m = re.search(r"sled store after one 1000-step sync run: (\d+) bytes apparent", err)
lg_bytes = lg_rows[(1000, "sqlite", "sync")]["db_bytes"]
if m:
    b = int(m.group(1))
    rows.append(("bytes on disk after one 1000-step run (sqlite sync vs sled sync)",
                 f"{lg_bytes / 2**20:,.1f} MiB", f"{b / 2**20:,.2f} MiB", lg_bytes / b))
a, b = lg_res["resume_proc_wall"], ours_res["resume_ms_median"]
rows.append(("cold resume, whole process (LG process B vs `agentic resume`)", fmt(a, "ms"), fmt(b, "ms"), a / b))
b = ours_res["respond_resume_ms_median"]
rows.append(("cold resume incl. answering (LG process B vs `respond` + `resume`)", fmt(a, "ms"), fmt(b, "ms"), a / b))
floors = re.findall(r"fsync floor (\w+) \(append 100 B \+ fdatasync, 200 samples\): median ([\d.]+) us", err)
rows.append(("disk floor: LG write 4 KiB+fsync / ours 100 B+fdatasync (before, after)",
             fmt(lg_fs["write4k_fsync"]["median_us"], "us"), ", ".join(fmt(float(v), "us") for _, v in floors), None))
rows.append(("disk floor at the end: 100 B + fdatasync / + sync_file_range (sled's flush)",
             fmt(floor["fdatasync_100b_us"], "us"), fmt(floor["sync_file_range_100b_us"], "us"), None))
print("| scenario | LangGraph | ours | ratio (LangGraph / ours) |")
print("|---|---:|---:|---:|")
for s, a, b, r in rows:
    print(f"| {s} | {a} | {b} | {'-' if r is None else f'{r:,.1f}x'} |")
print()
print("loadavg:", " / ".join(l.strip() for l in open(f"{out}/loadavg.txt")))
EOF
echo
cat "$OUT/table.md"
