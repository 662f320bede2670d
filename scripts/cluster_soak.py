#!/usr/bin/env python3
"""A soak of the one logical server (issue #45 item 5): several `agentic serve` processes on one PostgreSQL
database, every feature at once, and faults.

    cargo build && scripts/setup-peers.sh
    python3 scripts/cluster_soak.py --binary target/debug/agentic --minutes 2 --seed 1     # CI size
    python3 scripts/cluster_soak.py --binary target/debug/agentic --minutes 30 --seed 7    # the documented soak

The database: the PostgreSQL server of AGENTIC_TEST_PG_URL when it is set (a fresh database is created in it
with psql, dropped at the end; the database restart fault needs its data directory, AGENTIC_TEST_PG_DIR),
else a throwaway cluster started with scripts/pg-test-server.sh (stopped and deleted at the end).

What runs: 3 servers (`--lease-ms 1500`, `--specs DIR`, no token), a loopback OpenAI-compatible model in this
process (deterministic answers: `done(<prompt>)`, or a tool call `charge`/`slow_charge` of the amount the
prompt names, then `done: <tool results>`), and the MCP ledger peer (tests/peers/mcp_ledger.py over streamable
HTTP, with the protocol peers' Python: each tool call appends a line with its idempotency key). For --minutes,
runs of these specs are posted to random servers (by name or as text):

    chain          an llm step, a parallel mapper of llm steps over n items, an llm step
    human          llm, a human step (answered later through a random server), llm
    approve        an llm agent calling the ledger's `charge` (effect once, approve: true; approved through a
                   random server), then a compute step
    retry          the same with `slow_charge`, effect retry
    once           the same with `slow_charge`, effect once, no approval (a crash during the call: in doubt)
    budget         four llm steps under a 25-token budget: suspends at the third call, answered with 1000
    deadline       a human step with a 3 s deadline (on_timeout: default), then llm; answered in time, late
                   (409) or never
    deadline_fail  the same with on_timeout: fail (the run fails when it expires: the spec says so)
    tick           a schedule every 5 s (schedules.yaml in --specs)

and random runs are cancelled (running or suspended), completed runs forked at a random step, and the event
streams of a sample of runs read on random servers until they end (reconnecting with Last-Event-ID when the
server dies). Meanwhile, at times drawn from the seed (one fault at a time): kill -9 of a server (restarted a
few seconds later on the same port or a new one), SIGSTOP of a server past its lease (then SIGCONT), a
PostgreSQL restart (`pg_ctl restart -m fast`); half the kills and pauses aim at the server executing a ledger
call under way, when there is one. A call cut that way comes back in doubt: it is answered `{"result": ..}`
when the ledger holds its key (it happened), else `retry`, never while a server is paused.

At the end: no new runs, the schedule deleted, everything pending answered, every run must end (bounded), then
the invariants are checked on every run and printed with counts:
  ended          every run ended;
  output         a completed run has the exact output an uncrashed run gives (computed from its inputs);
  failed as ...  only a deadline_fail run whose deadline passed unanswered failed, saying it timed out;
  cancel         a run ended cancelled only if the soak cancelled it; a cancel that got 202 ended it cancelled
                 unless it completed first;
  answers        every answer that got 202 was used (the run went on);
  journal        the journal's seqs are 1..n, no agent path completed twice, a completed run's completions are
                 exactly those of its spec;
  ledger         an effect-once call's idempotency key is in the ledger at most once, and exactly once for a
                 call its run completed (none for a fork that inherited the finished call); a completed retry
                 call is in it at least once;
  streams        each stream read: journaled events in seq order, no step twice, every journaled step, one final
                 event, last, the run's status;
  schedule       one run per tick, none missed; servers agree: two servers give the same status and output.
Exit 0 only with 0 violations. Product bugs the soak found are known by their signature (KNOWN): they are
reported apart and count as violations unless --tolerate-known; `--repro B1` (or B2) reproduces one alone. The
work directory (server logs, the ledger, `actions.jsonl`: every action with its time and answer,
`streams.jsonl`) is kept on failure or with --keep.
"""
import argparse
import concurrent.futures
import glob
import heapq
import http.client
import http.server
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LEASE_MS = 1500
MODEL_DELAY_S = 0.1          # every model answer
SLOW_MS = 1500               # the ledger's slow_charge: the line is written, then the answer comes this late
DEADLINE_S = 3               # the human steps of `deadline` and `deadline_fail`
SCHEDULE_EVERY_S = 5
BUDGET_TOKENS = 25           # every model call reports 10 tokens: the third call crosses it
MAX_ACTIVE = 10              # runs not ended at once (new runs wait below it)
START_EVERY_S = 0.8          # mean time between new runs
CANCEL_EVERY_S = 7.0         # mean time between cancels
FORK_EVERY_S = 6.0           # mean time between forks
STREAM_SHARE = 0.3           # of new runs, whose events are read
MAX_STREAMS = 6              # readers at once
HTTP_TIMEOUT_S = 5.0
IN_DOUBT_GRACE_S = 3.0       # no in-doubt call is settled until every server ran this long since a SIGCONT
FINALS = ("completed", "failed", "cancelled")
JOURNALED = ("agent_completed", "agent_failed", "tool_call", "model_turn")
# Product bugs the soak found and knows by their signature: reported apart, violations unless --tolerate-known
# (the fixed ones, FIXED, always: a regression). `--repro B1` etc. exits 0 once a bug is gone.
KNOWN = {
    "B1": "on a PostgreSQL store, a stream read on the server executing a run that suspends repeats the steps "
          "that server appended since the stream's follower last polled (up to 500 ms of them), then `suspended` "
          "again, with a seq (server/src/cluster.rs: Follower::local counts the steps executed here only when it "
          "polls; Cluster::ended drops them when the run suspends, and the follower reads them from the store)",
    "B2": "on a PostgreSQL store, a run whose execution ends while the database restarts gets a `failed` event "
          "({\"error\": \"the run stopped\"}) on the streams of the server that executed it, though its record "
          "says completed (server/src/host.rs Host::finished: the record cannot be read, and that is taken for a "
          "run that ended before its record said so; the server logs `cannot read the run's record after it ended`)",
    "B3": "a run resumed after an answer to a tool call's approval or to a budget keeps the answered response in its "
          "record's `pending` while it executes (status `running`); when its server dies then, no server takes it "
          "over, nor does a server started again on a sled store (server/src/host.rs Host::resume_interrupted "
          "takes `running` runs only with nothing pending, ready_to_resume only suspended ones): it stays `running`",
    "B4": "on a PostgreSQL store, a stream read on a server paused past its run's lease (SIGSTOP) ends with the "
          "run's final event without the steps the server that took the run over journaled meanwhile "
          "(server/src/host.rs Host::finished publishes the final event it reads from the record as soon as the "
          "fenced execution stops there, before the stream's follower has read those steps)",
}
# Fixed on 2026-12-07 (server/src/cluster.rs: the follower learns the steps appended here when the run's execution
# here ends, and passes on its end on a shared store; server/src/host.rs: a running run whose pending responses
# are all answered is taken over; engine/src/budget.rs: a budget response whose invocation completed since is not
# read again when the run is taken over).
FIXED = ("B1", "B2", "B3", "B4")

KINDS = {  # kind: weight of new runs
    "chain": 3.0, "human": 3.0, "approve": 2.0, "retry": 1.5, "once": 1.5, "budget": 1.5, "deadline": 1.5,
    "deadline_fail": 1.0,
}
FORKABLE = ("chain", "human", "approve", "retry", "once", "budget")
LEDGER_TOOL = {"approve": "charge", "retry": "slow_charge", "once": "slow_charge"}

START = time.monotonic()
SHUTDOWN = threading.Event()  # set on the way out: requests and readers give up at once


def now():
    return time.monotonic() - START


def log(message):
    print(f"[{now():7.1f}s] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------
# The specs and what an uncrashed run of each gives

def specs(model_url, ledger_url):
    """The spec files of --specs (name: text) for the loopback model and ledger."""
    models = f'models:\n  default: {{ provider: openai, base_url: "{model_url}/v1", model: gpt-test }}\n'
    ledger = f'mcp_servers:\n  ledger: {{ url: "{ledger_url}" }}\n'

    def tool_spec(name, tools):
        return (
            f"version: 1\nname: {name}\nroot: main\nparams: {{ job: string, amount: integer }}\n{models}{ledger}"
            "agents:\n"
            "  main: { kind: sequence, agents: [desk, receipt], output_key: receipt }\n"
            "  desk:\n    kind: llm\n    user: \"charge {{ amount }} for {{ job }}\"\n    output_key: reply\n"
            f"    tools:\n      - {tools}\n"
            "  receipt: { kind: compute, template: \"{{ job }}: {{ reply }}\", output_key: receipt }\n"
        )

    human_step = (
        "  ask:\n    kind: human\n    prompt: \"answer for {{ job }}?\"\n    response_id: ask\n"
        f"    deadline: {DEADLINE_S}s\n"
    )
    return {
        "chain": (
            f"version: 1\nname: chain\nroot: main\nparams: {{ job: string, n: integer }}\n{models}agents:\n"
            "  main: { kind: sequence, agents: [s1, parts, fan, s3], output_key: s3 }\n"
            "  s1: { kind: llm, user: \"s1 of {{ job }}\", output_key: s1 }\n"
            "  parts: { kind: compute, value: \"range(n) | list\", output_key: parts }\n"
            "  fan: { kind: parallel_mapper, items: parts, item_key: p, agent: piece, max_concurrency: 2, "
            "output_key: pieces }\n"
            "  piece: { kind: llm, user: \"piece {{ p }} of {{ job }}\", output_key: piece }\n"
            "  s3: { kind: llm, user: \"s3 after {{ s1 }} and {{ pieces | join(' + ') }}\", output_key: s3 }\n"
        ),
        "human": (
            f"version: 1\nname: human\nroot: main\nparams: {{ job: string }}\n{models}agents:\n"
            "  main: { kind: sequence, agents: [draft, ok, final], output_key: final }\n"
            "  draft: { kind: llm, user: \"draft {{ job }}\", output_key: draft }\n"
            "  ok: { kind: human, prompt: \"ok {{ job }}?\", response_id: ok, output_key: answer }\n"
            "  final: { kind: llm, user: \"final {{ draft }} with {{ answer }}\", output_key: final }\n"
        ),
        "approve": tool_spec("approve", "{ mcp: ledger, filter: [charge], effect: once, approve: true }"),
        "retry": tool_spec("retry", "{ mcp: ledger, filter: [slow_charge], effect: retry }"),
        "once": tool_spec("once", "{ mcp: ledger, filter: [slow_charge], effect: once }"),
        "budget": (
            f"version: 1\nname: budget\nroot: main\nparams: {{ job: string }}\nbudget: {{ tokens: {BUDGET_TOKENS} }}\n"
            f"{models}agents:\n"
            "  main: { kind: sequence, agents: [b1, b2, b3, b4], output_key: b4 }\n"
            "  b1: { kind: llm, user: \"b1 of {{ job }}\", output_key: b1 }\n"
            "  b2: { kind: llm, user: \"b2 after {{ b1 }}\", output_key: b2 }\n"
            "  b3: { kind: llm, user: \"b3 after {{ b2 }}\", output_key: b3 }\n"
            "  b4: { kind: llm, user: \"b4 after {{ b3 }}\", output_key: b4 }\n"
        ),
        "deadline": (
            f"version: 1\nname: deadline\nroot: main\nparams: {{ job: string }}\n{models}agents:\n"
            "  main: { kind: sequence, agents: [ask, final], output_key: final }\n"
            f"{human_step}    on_timeout: {{ default: \"'auto'\" }}\n    output_key: answer\n"
            "  final: { kind: llm, user: \"final {{ job }} with {{ answer }}\", output_key: final }\n"
        ),
        "deadline_fail": (
            f"version: 1\nname: deadline_fail\nroot: main\nparams: {{ job: string }}\n{models}agents:\n"
            "  main: { kind: sequence, agents: [ask, final], output_key: final }\n"
            f"{human_step}    on_timeout: fail\n    output_key: answer\n"
            "  final: { kind: llm, user: \"final {{ job }} with {{ answer }}\", output_key: final }\n"
        ),
        "tick": (
            f"version: 1\nname: tick\nroot: main\nparams: {{ label: string }}\n{models}agents:\n"
            "  main: { kind: sequence, agents: [say, shout], output_key: shout }\n"
            "  say: { kind: compute, template: \"tick {{ label }}\", output_key: said }\n"
            "  shout: { kind: llm, user: \"shout {{ said }}\", output_key: shout }\n"
        ),
    }


SCHEDULES = (
    f"- {{ id: every{SCHEDULE_EVERY_S}s, spec_name: tick, cron: '*/{SCHEDULE_EVERY_S} * * * * *', overlap: allow, "
    "inputs: { label: five } }\n"
)
SCHEDULE_ID = f"every{SCHEDULE_EVERY_S}s"


def human_answer(job):
    return f"yes-{job}"


def expected_output(kind, inputs, answer=None):
    """What an uncrashed run of `kind` gives for `inputs` (`answer`: the deadline kinds' human answer)."""
    job = inputs.get("job")
    if kind == "chain":
        s1 = f"done(s1 of {job})"
        pieces = " + ".join(f"done(piece {p} of {job})" for p in range(inputs["n"]))
        return f"done(s3 after {s1} and {pieces})"
    if kind == "human":
        return f"done(final done(draft {job}) with {human_answer(job)})"
    if kind in LEDGER_TOOL:
        return f"{job}: done: charged {inputs['amount']}"
    if kind == "budget":
        out = f"done(b1 of {job})"
        for k in (2, 3, 4):
            out = f"done(b{k} after {out})"
        return out
    if kind in ("deadline", "deadline_fail"):
        return f"done(final {job} with {answer})"
    if kind == "tick":
        return f"done(shout tick {inputs['label']})"
    raise ValueError(kind)


def expected_completions(kind, inputs):
    """Agent name: completions journaled by a completed run of `kind`."""
    if kind == "chain":
        return {"main": 1, "s1": 1, "parts": 1, "fan": 1, "piece": inputs["n"], "s3": 1}
    if kind == "human":
        return {"main": 1, "draft": 1, "ok": 1, "final": 1}
    if kind in LEDGER_TOOL:
        return {"main": 1, "desk": 1, "receipt": 1}
    if kind == "budget":
        return {"main": 1, "b1": 1, "b2": 1, "b3": 1, "b4": 1}
    if kind in ("deadline", "deadline_fail"):
        return {"main": 1, "ask": 1, "final": 1}
    if kind == "tick":
        return {"main": 1, "say": 1, "shout": 1}
    raise ValueError(kind)


# ---------------------------------------------------------------------------------------------------------
# Processes (every child is ended at exit, failure and Ctrl-C included)

class Children:
    def __init__(self):
        self.lock = threading.Lock()
        self.procs = []

    def spawn(self, args, **kw):
        proc = subprocess.Popen(args, start_new_session=True, **kw)
        with self.lock:
            self.procs.append(proc)
        return proc

    def end_all(self):
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                    proc.kill()
                except OSError:
                    pass
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


CHILDREN = Children()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


# ---------------------------------------------------------------------------------------------------------
# PostgreSQL

def pg_bin():
    """The directory of pg_ctl, found as scripts/pg-test-server.sh finds it."""
    if os.environ.get("PG_BIN"):
        return os.environ["PG_BIN"]
    initdb, ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and ctl:
        return os.path.dirname(initdb)

    def version(path):
        return [int(p) if p.isdigit() else 0 for p in path.split("/")[-2].split(".")]

    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version)
    return dirs[-1] if dirs else None


class Postgres:
    """The database of the soak: a fresh database in AGENTIC_TEST_PG_URL's server, or a throwaway cluster."""

    def __init__(self, seed):
        self.seed = seed
        self.started_dir = None
        self.db = None
        self.dir = None

    def open(self):
        url = os.environ.get("AGENTIC_TEST_PG_URL")
        self.dir = os.environ.get("AGENTIC_TEST_PG_DIR") if url else None
        if not url:
            out = subprocess.run([os.path.join(ROOT, "scripts/pg-test-server.sh"), "start"], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            found = dict(re.findall(r"export (\w+)='([^']*)'", out))
            url, self.dir = found["AGENTIC_TEST_PG_URL"], found["AGENTIC_TEST_PG_DIR"]
            self.started_dir = self.dir
        self.server_url = url
        self.psql = shutil.which("psql") or (pg_bin() and os.path.join(pg_bin(), "psql"))
        if not self.psql or not os.path.exists(self.psql):
            raise SystemExit("cluster soak: psql not found (install PostgreSQL's client)")
        self.db = f"soak_s{self.seed}_{os.getpid()}"
        self.sql(f'CREATE DATABASE "{self.db}"')
        parsed = urllib.parse.urlparse(url)
        self.url = parsed._replace(path="/" + self.db).geturl()

    def sql(self, statement):
        subprocess.run([self.psql, self.server_url, "-v", "ON_ERROR_STOP=1", "-q", "-c", statement], check=True,
                       stdout=subprocess.DEVNULL)

    def can_restart(self):
        return bool(self.dir) and os.path.isdir(os.path.join(self.dir, "data")) and pg_bin() is not None

    def restart(self):
        """`pg_ctl restart -m fast` as the cluster's owner (runuser when root), as tests/server_faults.rs does."""
        data = os.path.join(self.dir, "data")
        args = [os.path.join(pg_bin(), "pg_ctl"), "-D", data, "-l", os.path.join(self.dir, "server.log"), "-w",
                "-t", "30", "-m", "fast", "restart"]
        if os.geteuid() == 0:
            args = ["runuser", "-u", pwd.getpwuid(os.stat(data).st_uid).pw_name, "--"] + args
        began = time.monotonic()
        out = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
        if out.returncode != 0:
            raise RuntimeError(f"pg_ctl restart: {out.stdout}{out.stderr}")
        return time.monotonic() - began

    def close(self):
        if self.started_dir:
            subprocess.run([os.path.join(ROOT, "scripts/pg-test-server.sh"), "stop", self.started_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif self.db:
            try:
                self.sql(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            except subprocess.CalledProcessError:
                pass


# ---------------------------------------------------------------------------------------------------------
# The loopback model

class Model:
    """An OpenAI-compatible model: `done(<last message>)`; with tools, a call of the first tool offered with the
    amount the first user message names (`charge 37 for ...`), then `done: <the tool results>`."""

    def __init__(self, hold=None, delay=MODEL_DELAY_S):
        self.calls = Counter()
        self.lock = threading.Lock()
        self.hold = hold    # an Event: every answer waits for it (--repro B2)
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self.send_error(404)
                    return
                message = model.answer(json.loads(raw or b"{}"))
                if model.hold is not None:
                    model.hold.wait(120)
                time.sleep(delay)
                body = json.dumps({
                    "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
                }).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the caller went away (a server killed, a run cancelled)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def text(content):
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return "" if content is None else str(content)

    def answer(self, body):
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        results = [self.text(m.get("content")) for m in messages if m.get("role") == "tool"]
        with self.lock:
            self.calls[self.text(messages[-1].get("content")) if messages else ""] += 1
        if tools and not results:
            user = next((self.text(m.get("content")) for m in messages if m.get("role") == "user"), "")
            amount = int(re.search(r"charge (\d+)", user).group(1))
            name = tools[0]["function"]["name"]
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": name, "arguments": json.dumps({"amount": amount})}}]}
        if tools:
            return {"role": "assistant", "content": "done: " + " | ".join(results)}
        return {"role": "assistant", "content": f"done({self.text(messages[-1].get('content'))})"}


# ---------------------------------------------------------------------------------------------------------
# The servers

class Server:
    def __init__(self, index):
        self.index = index
        self.proc = None
        self.port = None
        self.url = None
        self.state = "down"  # up, stopped, down
        self.starts = 0

    @property
    def name(self):
        return f"s{self.index}"


class Cluster:
    def __init__(self, args, store, specs_dir, workdir):
        self.binary = args.binary
        self.store = store
        self.specs_dir = specs_dir
        self.workdir = workdir
        self.servers = [Server(i) for i in range(args.servers)]
        self.lock = threading.Lock()
        self.last_cont = -1e9
        self.pauses = []    # [server index, SIGSTOP time, SIGCONT time]
        self.problems = []  # panics and errors the servers logged

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("AGENTIC_LOG", "AGENTIC_STORE", "AGENTIC_SERVER", "AGENTIC_TOKEN",
                            "AGENTIC_TEST_KILL_AFTER_STEP", "OPENAI_BASE_URL")}
        env["AGENTIC_LOG"] = "warn,rmcp=off"
        env["OPENAI_API_KEY"] = "sk-test"
        return env

    def start(self, server, port=0):
        """Starts `server` listening on `port` (0: a free one); waits until it announces its URL."""
        server.starts += 1
        logfile = open(os.path.join(self.workdir, f"server-{server.index}.log"), "a", encoding="utf-8")
        logfile.write(f"--- start {server.starts} at {now():.1f}s (port {port or 'any'})\n")
        logfile.flush()
        cmd = [self.binary, "serve", "--store", self.store, "--listen", f"127.0.0.1:{port}", "--lease-ms",
               str(LEASE_MS), "--specs", self.specs_dir]
        proc = CHILDREN.spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=self.env(), text=True, errors="replace")
        announced = threading.Event()
        found = {}

        def read():
            for line in proc.stderr:
                logfile.write(line)
                logfile.flush()
                if not announced.is_set() and line.startswith("agentic serve: http"):
                    found["url"] = line.split(" ")[2]
                    announced.set()
                if "panicked" in line or " ERROR " in line:
                    with self.lock:
                        self.problems.append(f"{server.name}: {line.strip()}")
            logfile.close()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not announced.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                try:
                    proc.kill()
                except OSError:
                    pass
                return False
        with self.lock:
            server.proc, server.url, server.state = proc, found["url"], "up"
            server.port = int(server.url.rsplit(":", 1)[1])
        return True

    def kill9(self, server):
        with self.lock:
            server.state = "down"
        server.proc.kill()
        server.proc.wait()

    def stop(self, server):
        with self.lock:
            server.state = "stopped"
            self.pauses.append([server.index, now(), None])
        os.kill(server.proc.pid, signal.SIGSTOP)

    def cont(self, server):
        os.kill(server.proc.pid, signal.SIGCONT)
        with self.lock:
            server.state = "up"
            self.last_cont = now()
            self.pauses[-1][2] = self.last_cont

    def paused_during(self, index, begin, end):
        """Whether server `index` was paused (SIGSTOP) at some time between `begin` and `end`."""
        with self.lock:
            return any(i == index and stop <= end and (cont is None or cont >= begin)
                       for i, stop, cont in self.pauses)

    def quiet(self):
        """No server stopped now, and none continued in the last IN_DOUBT_GRACE_S: a paused server's call in
        flight has reached the ledger by now."""
        with self.lock:
            return (all(s.state != "stopped" for s in self.servers)
                    and now() - self.last_cont > IN_DOUBT_GRACE_S)

    def urls(self):
        with self.lock:
            return [(s.index, s.url) for s in self.servers if s.url]


# ---------------------------------------------------------------------------------------------------------
# HTTP

class Reply:
    def __init__(self, status, body, server, uncertain, tries):
        self.status, self.body, self.server, self.uncertain, self.tries = status, body, server, uncertain, tries

    def error(self):
        return self.body.get("error", "") if isinstance(self.body, dict) else str(self.body)


class Api:
    """Requests to random servers: a server that refuses the connection, does not answer in time, or answers 503
    (Retry-After) is expected during a fault; the request goes to another one."""

    def __init__(self, cluster, seed):
        self.cluster = cluster
        self.rng = random.Random(f"{seed}:servers")
        self.lock = threading.Lock()
        self.retries = Counter()

    def once(self, url, method, path, body, timeout, headers=None):
        parsed = urllib.parse.urlparse(url)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            hdrs = {"Content-Type": "application/json"} if data is not None else {}
            hdrs.update(headers or {})
            try:
                conn.request(method, path, body=data, headers=hdrs)
            except ConnectionRefusedError:
                raise
            except OSError as e:
                raise Sent(e) from e
            try:
                response = conn.getresponse()
                text = response.read().decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as e:
                raise Sent(e) from e
            try:
                parsed_body = json.loads(text) if text else None
            except ValueError:
                parsed_body = text
            return response.status, parsed_body, response.getheader("Retry-After")
        finally:
            conn.close()

    def request(self, method, path, body=None, timeout=HTTP_TIMEOUT_S, limit=90.0, server=None):
        """The first answer that is not a 503, from random servers (or `server` first); `uncertain` when an
        earlier try may have been acted on (sent, no answer)."""
        deadline = time.monotonic() + limit
        uncertain, tries = False, 0
        while True:
            if SHUTDOWN.is_set():
                return Reply(None, {"error": "the soak is stopping"}, None, uncertain, tries)
            urls = self.cluster.urls()
            with self.lock:
                self.rng.shuffle(urls)
            if server is not None:
                urls.sort(key=lambda u: u[0] != server)
            for index, url in urls:
                tries += 1
                try:
                    status, parsed, retry_after = self.once(url, method, path, body, timeout)
                except ConnectionRefusedError:
                    self.retries["refused"] += 1
                    continue
                except Sent:
                    self.retries["no answer"] += 1
                    uncertain = True
                    continue
                except OSError:
                    self.retries["refused"] += 1
                    continue
                if status == 503:
                    self.retries["503"] += 1
                    time.sleep(min(float(retry_after or 1), 2.0))
                    continue
                return Reply(status, parsed, index, uncertain, tries)
            if time.monotonic() > deadline:
                return Reply(None, {"error": f"no server answered {method} {path} within {limit:.0f} s"}, None,
                             uncertain, tries)
            time.sleep(0.3)


class Sent(Exception):
    """A request that may have reached the server, whose answer did not come."""


def q(segment):
    return urllib.parse.quote(segment, safe="")


# ---------------------------------------------------------------------------------------------------------
# The runs the soak knows

class Run:
    def __init__(self, run_id, kind, inputs, parent=None, at_seq=None):
        self.id = run_id
        self.kind = kind
        self.inputs = inputs
        self.parent = parent
        self.at_seq = at_seq
        self.status = "running"
        self.created = False   # its POST (or fork) answered 201
        self.ended = False
        self.answers = {}      # response id: {"value", "outcome", "at"}
        self.cancel = None     # {"outcome", "at"}
        self.doubts = []       # ("result" | "retry", response id)
        self.plan = None       # deadline kinds: answer, late, none
        self.handled = set()   # pending responses scheduled or answered: (id, started_at)
        self.stream = None
        self.final = None      # the final GET

    def expected_answer(self):
        """The deadline kinds' answer as the run used it: ours when accepted, the default when refused as timed
        out or never given; None when unknown (either)."""
        a = self.answers.get("ask")
        value = human_answer(self.inputs["job"])
        if a is None or a["outcome"] in ("timed_out", "refused"):
            return "auto"
        if a["outcome"] == "accepted":
            return value
        return None


class Stream:
    def __init__(self, run_id):
        self.run_id = run_id
        self.events = []        # (name, seq, SSE id, data, server index, time)
        self.connects = 0
        self.finished = False
        self.errors = []


# ---------------------------------------------------------------------------------------------------------
# The soak

class Soak:
    def __init__(self, args, cluster, api, postgres, ledger_path, workdir, specs_text):
        self.args = args
        self.cluster = cluster
        self.api = api
        self.pg = postgres
        self.ledger_path = ledger_path
        self.workdir = workdir
        self.specs_text = specs_text
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.runs = {}
        self.order = []
        self.counts = Counter()
        self.faults = Counter()
        self.started = 0
        self.stopping = False
        self.streams_stop_at = None
        self.queue = []           # (due, n, fn, args)
        self.queue_n = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        self.stream_threads = []
        self.actions = open(os.path.join(workdir, "actions.jsonl"), "a", encoding="utf-8")
        self.errors = []          # the script's own surprises (violations too)

    def record(self, **entry):
        entry["t"] = round(now(), 3)
        with self.lock:
            self.actions.write(json.dumps(entry) + "\n")
            self.actions.flush()

    def later(self, delay, fn, *args):
        with self.lock:
            self.queue_n += 1
            heapq.heappush(self.queue, (now() + delay, self.queue_n, fn, args))

    def submit(self, fn, *args):
        def guarded():
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a bug of the soak: reported, counted as a violation
                text = traceback.format_exc()
                log(f"error in {fn.__name__}: {text}")
                with self.lock:
                    self.errors.append(f"the soak's {fn.__name__} raised: {text.strip().splitlines()[-1]}")
        self.pool.submit(guarded)

    # --- starting runs ------------------------------------------------------------------------------

    def new_run(self):
        kinds = list(KINDS)
        kind = self.rng.choices(kinds, weights=[KINDS[k] for k in kinds])[0]
        n = self.started
        self.started += 1
        run_id = f"{kind}-{n:05d}"
        job = f"job{n}"
        inputs = {"job": job}
        if kind == "chain":
            inputs["n"] = self.rng.randint(1, 3)
        if kind in LEDGER_TOOL:
            inputs["amount"] = self.rng.randint(1, 999)
        run = Run(run_id, kind, inputs)
        if kind in ("deadline", "deadline_fail"):
            run.plan = self.rng.choices(["answer", "late", "none"], weights=[5, 2, 3])[0]
        by_name = self.rng.random() < 0.5
        stream = self.rng.random() < STREAM_SHARE
        with self.lock:
            self.runs[run_id] = run
            self.order.append(run_id)
        self.submit(self.post_run, run, by_name, stream)

    def post_run(self, run, by_name, stream):
        body = {"inputs": run.inputs, "run_id": run.id}
        if by_name:
            body["spec_name"] = run.kind
        else:
            body["spec"] = self.specs_text[run.kind]
            body["file_name"] = f"{run.kind}.yaml"
        reply = self.api.request("POST", "/api/v1/runs", body)
        ok = reply.status == 201 or (reply.status == 409 and reply.uncertain)
        self.record(action="start", run=run.id, kind=run.kind, status=reply.status, server=reply.server,
                    by="name" if by_name else "text", error=None if ok else reply.error())
        if not ok:
            with self.lock:
                self.errors.append(f"{run.id}: POST /api/v1/runs answered {reply.status}: {reply.error()}")
                run.ended, run.status = True, "not started"
            return
        run.created = True
        if stream and self.stream_count() < MAX_STREAMS:
            self.start_stream(run)

    # --- answers ------------------------------------------------------------------------------------

    def inspect(self, run):
        """Reads a suspended run's pending responses and schedules an answer to each not handled yet."""
        reply = self.api.request("GET", f"/api/v1/runs/{q(run.id)}")
        if reply.status != 200:
            return
        detail = reply.body
        for pending in detail.get("pending") or []:
            rid = pending["id"]
            kind = pending.get("kind", "human")
            data = pending.get("data") or {}
            key = (rid, data.get("started_at") if kind == "in_doubt" else None)
            with self.lock:
                if key in run.handled:
                    continue
                run.handled.add(key)
            rng = random.Random(f"{self.args.seed}:{run.id}:{rid}:{len(run.handled)}")
            quick = 0.0 if self.stopping else 1.0
            if kind == "in_doubt":
                self.later(0.2 + quick * rng.uniform(0, 1), self.settle_doubt, run, rid, data)
            elif kind == "tool_call":
                choice = rng.choice(["approve", {"decision": "approve"}, "hash"])
                value = {"decision": "approve", "args_hash": data.get("args_hash")} if choice == "hash" else choice
                self.later(quick * rng.uniform(0.2, 3), self.answer, run, rid, value)
            elif kind == "budget":
                self.later(quick * rng.uniform(0.2, 3), self.answer, run, rid, 1000)
            elif kind == "human":
                value = human_answer(run.inputs["job"])
                if run.kind in ("deadline", "deadline_fail"):
                    if run.plan == "answer":
                        self.later(rng.uniform(0.1, 0.8), self.answer, run, rid, value)
                    elif run.plan == "late":
                        due = DEADLINE_S + rng.uniform(1.0, 2.5)
                        self.later(due, self.answer, run, rid, value)
                    # none: the deadline passes; the spec says what then
                else:
                    self.later(quick * rng.uniform(0.2, 4), self.answer, run, rid, value)
            else:
                with self.lock:
                    self.errors.append(f"{run.id}: a pending response of an unexpected kind: {pending}")

    def answer(self, run, rid, value):
        reply = self.api.request("POST", f"/api/v1/runs/{q(run.id)}/responses/{q(rid)}", {"value": value})
        error = reply.error()
        if reply.status == 202:
            outcome = "accepted"
        elif reply.status == 409 and "already answered" in error and reply.uncertain:
            outcome = "accepted"
        elif reply.status == 409 and "timed out" in error:
            outcome = "timed_out"
        elif reply.status in (404, 409):
            outcome = "refused"
        elif reply.status is None:
            outcome = "unknown"
        else:
            outcome = "error"
            with self.lock:
                self.errors.append(f"{run.id}: answer {rid}: {reply.status}: {error}")
        if reply.uncertain and outcome == "refused":
            outcome = "unknown"
        with self.lock:
            run.answers[rid] = {"value": value, "outcome": outcome, "at": now(), "status": reply.status}
            self.counts[f"answer:{outcome}"] += 1
        self.record(action="answer", run=run.id, response=rid, value=value, status=reply.status,
                    server=reply.server, outcome=outcome, error=error if reply.status != 202 else None)

    def ledger_lines(self):
        try:
            with open(self.ledger_path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def settle_doubt(self, run, rid, data):
        """A call cut by a crash: answered with what it did when the ledger holds its key (it happened), else
        `retry` (it never reached the ledger) — only while no server is paused (a paused one may still send)."""
        if not self.cluster.quiet():
            self.later(1.0, self.settle_doubt, run, rid, data)
            return
        prefix = run.id + "/"
        made = [line for line in self.ledger_lines() if (line.get("idempotency_key") or "").startswith(prefix)]
        if made:
            value, how = {"result": f"charged {run.inputs['amount']}"}, "result"
        else:
            value, how = "retry", "retry"
        with self.lock:
            run.doubts.append((how, rid))
            self.counts[f"doubt:{how}"] += 1
        log(f"in doubt: {run.id} {rid} ({data.get('tool')}): answered {how}")
        self.answer(run, rid, value)

    # --- cancels and forks --------------------------------------------------------------------------

    def cancel_some(self):
        with self.lock:
            candidates = [r for r in self.runs.values() if r.created and not r.ended and r.cancel is None
                          and r.kind != "tick" and r.status in ("running", "suspended")]
        if not candidates:
            return
        run = self.rng.choice(sorted(candidates, key=lambda r: r.id))
        run.cancel = {"outcome": "pending", "at": now()}
        self.submit(self.post_cancel, run)

    def post_cancel(self, run):
        seen = run.status
        reply = self.api.request("POST", f"/api/v1/runs/{q(run.id)}/cancel", {})
        if reply.status == 202:
            outcome = "accepted"
        elif reply.status == 409:
            outcome = "unknown" if reply.uncertain else "refused"
        elif reply.status is None:
            outcome = "unknown"
        else:
            outcome = "error"
            with self.lock:
                self.errors.append(f"{run.id}: cancel: {reply.status}: {reply.error()}")
        with self.lock:
            run.cancel = {"outcome": outcome, "at": now(), "seen": seen}
            self.counts[f"cancel:{outcome}"] += 1
        self.record(action="cancel", run=run.id, seen=seen, status=reply.status, server=reply.server,
                    outcome=outcome, error=reply.error() if reply.status != 202 else None)

    def fork_some(self):
        with self.lock:
            candidates = [r for r in self.runs.values() if r.ended and r.status == "completed"
                          and r.parent is None and r.kind in FORKABLE and not r.id + "-f" in self.runs]
        if not candidates:
            return
        parent = self.rng.choice(sorted(candidates, key=lambda r: r.id))
        pick = self.rng.random()
        stream = self.rng.random() < STREAM_SHARE
        fork = Run(parent.id + "-f", parent.kind, parent.inputs, parent=parent.id)
        with self.lock:
            self.runs[fork.id] = fork
            self.order.append(fork.id)
        self.submit(self.post_fork, parent, fork, pick, stream)

    def post_fork(self, parent, fork, pick, stream):
        reply = self.api.request("GET", f"/api/v1/runs/{q(parent.id)}")
        steps = reply.body.get("steps", 1) if reply.status == 200 else 1
        at_seq = 1 + int(pick * steps)
        at_seq = min(max(at_seq, 1), steps)
        fork.at_seq = at_seq
        reply = self.api.request("POST", f"/api/v1/runs/{q(parent.id)}/fork", {"at_seq": at_seq, "run_id": fork.id})
        ok = reply.status == 201 or (reply.status == 409 and reply.uncertain)
        self.record(action="fork", run=fork.id, parent=parent.id, at_seq=at_seq, steps=steps, status=reply.status,
                    server=reply.server, error=None if ok else reply.error())
        with self.lock:
            self.counts["fork:" + ("ok" if ok else "refused")] += 1
            if not ok:
                self.errors.append(f"{fork.id}: fork of {parent.id} at {at_seq}: {reply.status}: {reply.error()}")
                fork.ended, fork.status = True, "not started"
                return
            fork.created = True
        if stream and self.stream_count() < MAX_STREAMS:
            self.start_stream(fork)

    # --- event streams ------------------------------------------------------------------------------

    def stream_count(self):
        with self.lock:
            return sum(1 for t in self.stream_threads if t.is_alive())

    def start_stream(self, run):
        run.stream = Stream(run.id)
        thread = threading.Thread(target=self.read_stream, args=(run.stream,), daemon=True)
        with self.lock:
            self.stream_threads.append(thread)
        thread.start()

    def read_stream(self, stream):
        """Reads GET /events on random servers until the final event; a dropped or silent connection is
        reconnected elsewhere with Last-Event-ID (the last `id:` seen), as a browser's EventSource does."""
        rng = random.Random(f"{self.args.seed}:stream:{stream.run_id}")
        last_id = None
        while not stream.finished:
            if SHUTDOWN.is_set() or (self.streams_stop_at is not None and now() > self.streams_stop_at):
                return
            urls = self.cluster.urls()
            index, url = rng.choice(urls)
            parsed = urllib.parse.urlparse(url)
            conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=25)
            stream.connects += 1
            try:
                headers = {"Accept": "text/event-stream"}
                if last_id is not None:
                    headers["Last-Event-ID"] = last_id
                conn.request("GET", f"/api/v1/runs/{q(stream.run_id)}/events", headers=headers)
                response = conn.getresponse()
                if response.status != 200:
                    response.read()
                    if response.status != 503:
                        stream.errors.append(f"{response.status} from s{index}")
                    time.sleep(0.5)
                    continue
                name, event_id, data = None, None, []
                while True:
                    raw = response.readline()
                    if not raw:
                        break
                    line = raw.decode("utf-8", "replace").rstrip("\r\n")
                    if line == "":
                        if name is not None or data:
                            payload = json.loads("\n".join(data)) if data else {}
                            stream.events.append((name or "message", payload.get("seq"), event_id, payload,
                                                  index, round(now(), 3)))
                            if event_id is not None:
                                last_id = event_id
                            if name in FINALS:
                                stream.finished = True
                                break
                        name, event_id, data = None, None, []
                    elif line.startswith(":"):
                        continue
                    else:
                        field, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        if field == "event":
                            name = value
                        elif field == "id":
                            event_id = value
                        elif field == "data":
                            data.append(value)
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.2)
            finally:
                conn.close()

    # --- polling ------------------------------------------------------------------------------------

    def poll(self):
        """Lists the runs (newest first) until every run not ended yet was seen; notes the ended ones and
        inspects the suspended ones' pending responses."""
        with self.lock:
            waiting = {r.id for r in self.runs.values() if r.created and not r.ended}
        cursor, seen = None, {}
        for _ in range(100):
            path = "/api/v1/runs?limit=200" + (f"&cursor={q(cursor)}" if cursor else "")
            reply = self.api.request("GET", path, limit=20)
            if reply.status != 200:
                return
            for item in reply.body.get("runs", []):
                seen[item["run_id"]] = item
            cursor = reply.body.get("next_cursor")
            if not cursor or waiting <= set(seen):
                break
        for run_id, item in seen.items():
            with self.lock:
                run = self.runs.get(run_id)
                if run is None:
                    if run_id.startswith(SCHEDULE_ID + "-"):
                        run = Run(run_id, "tick", {"label": "five"})
                        run.created = True
                        self.runs[run_id] = run
                        self.order.append(run_id)
                    else:
                        continue
                if run.ended or (not run.created and run.kind != "tick"):
                    continue
                run.status = item["status"]
                if run.status in FINALS:
                    run.ended = True
                    continue
                # A question not handled yet, or a call in doubt (the same id may be in doubt again).
                pending = item.get("pending", []) if run.status == "suspended" else []
                inspect = any((p, None) not in run.handled or p.startswith("doubt:") for p in pending)
            if inspect:
                self.submit(self.inspect, run)

    def poller(self):
        while not self.poll_stop:
            began = time.monotonic()
            try:
                self.poll()
            except Exception:  # noqa: BLE001
                log(f"poll: {traceback.format_exc()}")
            time.sleep(max(0.2, 1.0 - (time.monotonic() - began)))

    # --- faults -------------------------------------------------------------------------------------

    def fault_plan(self, seconds):
        """The faults and their times, from the seed: one at a time, every 8-18 s after the last recovered."""
        rng = random.Random(f"{self.args.seed}:faults")
        kinds = ["kill", "stop"] + (["db"] if self.pg.can_restart() else [])
        rng.shuffle(kinds)
        plan, t = [], rng.uniform(6, 12)
        while t < seconds - 8:
            kind = kinds.pop(0) if kinds else rng.choices(
                ["kill", "stop", "db"], weights=[4, 3, 2 if self.pg.can_restart() else 0])[0]
            server = rng.randrange(len(self.cluster.servers))
            # Half the kills and pauses aim at the server executing a tool call under way, if any.
            target = rng.random() < 0.5
            if kind == "kill":
                fault = {"kind": "kill", "server": server, "down": rng.uniform(2, 5), "same_port": rng.random() < 0.5,
                         "target": target}
                length = fault["down"] + 3 + 3 * target
            elif kind == "stop":
                fault = {"kind": "stop", "server": server, "for": rng.uniform(3.5, 5.5), "target": target}
                length = fault["for"] + 3 * target
            else:
                fault = {"kind": "db"}
                length = 4
            fault["at"] = t
            plan.append(fault)
            t += length + rng.uniform(8, 18)
        return plan

    def executor_of_a_call(self, limit):
        """The server executing a run whose ledger call is under way (its line written, the run not ended), found
        within `limit` seconds: killing or pausing it now cuts the call (in doubt for effect once)."""
        deadline = now() + limit
        while now() < deadline and not self.stopping:
            with self.lock:
                open_runs = {r.id for r in self.runs.values() if r.created and not r.ended and r.kind in LEDGER_TOOL}
            made = [(line.get("idempotency_key") or "").split("/", 1)[0] for line in self.ledger_lines()]
            for run_id in reversed([m for m in made if m in open_runs][-3:]):
                for server in list(self.cluster.servers):
                    if server.state != "up":
                        continue
                    try:
                        status, body, _ = self.api.once(server.url, "GET", f"/api/v1/runs/{q(run_id)}", None, 2)
                    except (OSError, Sent):
                        continue
                    if status == 200 and body.get("executing") and body.get("status") == "running":
                        return server, run_id
            time.sleep(0.2)
        return None, None

    def injector(self, plan):
        for fault in plan:
            while now() - self.began < fault["at"]:
                if self.stopping:
                    return
                time.sleep(0.1)
            if self.stopping:
                return
            server = self.cluster.servers[fault.get("server", 0)]
            if fault.get("target"):
                aimed, run_id = self.executor_of_a_call(3.0)
                if aimed is not None:
                    server = aimed
                    log(f"aiming at {server.name}: it executes {run_id}, whose tool call is under way")
                    with self.lock:
                        self.counts["faults aimed at a call under way"] += 1
            self.watch_servers()
            if fault["kind"] == "kill":
                log(f"fault: kill -9 {server.name} (pid {server.proc.pid}), down {fault['down']:.1f} s")
                self.cluster.kill9(server)
                self.faults["kill"] += 1
                self.record(action="fault", kind="kill", server=server.index)
                time.sleep(fault["down"])
                port = server.port if fault["same_port"] else 0
                if not self.cluster.start(server, port):
                    log(f"{server.name}: port {port} not free again; on a new port")
                    if not self.cluster.start(server, 0):
                        with self.lock:
                            self.errors.append(f"{server.name} did not start again after kill -9")
                log(f"{server.name} back at {server.url}")
                self.record(action="restart", server=server.index, url=server.url)
            elif fault["kind"] == "stop":
                log(f"fault: SIGSTOP {server.name} for {fault['for']:.1f} s")
                self.cluster.stop(server)
                self.faults["stop"] += 1
                self.record(action="fault", kind="stop", server=server.index)
                time.sleep(fault["for"])
                self.cluster.cont(server)
                self.record(action="cont", server=server.index)
            else:
                log("fault: PostgreSQL restart")
                self.faults["db"] += 1
                self.record(action="fault", kind="db")
                took = self.pg.restart()
                log(f"PostgreSQL back after {took:.1f} s")
                self.record(action="db back", took=took)

    # --- the soak -----------------------------------------------------------------------------------

    def run(self):
        seconds = self.args.minutes * 60
        self.began = now()
        plan = self.fault_plan(seconds)
        log("fault plan: " + ", ".join(
            f"{f['kind']}{'' if f['kind'] == 'db' else ' s' + str(f['server'])}@{f['at']:.0f}s" for f in plan))
        self.poll_stop = False
        poller = threading.Thread(target=self.poller, daemon=True)
        poller.start()
        injector = threading.Thread(target=self.injector, args=(plan,), daemon=True)
        injector.start()
        next_start = next_cancel = next_fork = 0.0
        next_cancel = self.rng.expovariate(1 / CANCEL_EVERY_S)
        next_fork = 5 + self.rng.expovariate(1 / FORK_EVERY_S)
        last_report = 0.0
        end = self.began + seconds
        while now() < end:
            t = now()
            with self.lock:
                active = sum(1 for r in self.runs.values() if not r.ended)
            if t >= next_start and active < MAX_ACTIVE:
                self.new_run()
                next_start = t + self.rng.expovariate(1 / START_EVERY_S)
            if t >= next_cancel:
                self.cancel_some()
                next_cancel = t + self.rng.expovariate(1 / CANCEL_EVERY_S)
            if t >= next_fork:
                self.fork_some()
                next_fork = t + self.rng.expovariate(1 / FORK_EVERY_S)
            self.run_due()
            self.watch_servers()
            if t - last_report > 15:
                last_report = t
                with self.lock:
                    by = Counter(r.status for r in self.runs.values())
                log(f"runs: {dict(by)}; faults: {dict(self.faults)}; streams reading: {self.stream_count()}")
            time.sleep(0.1)

        # The end: no new runs or faults; the schedule deleted; everything pending answered; every run ends.
        log("soak time over: no new runs; draining")
        self.stopping = True
        injector.join()
        reply = self.api.request("DELETE", f"/api/v1/schedules/{SCHEDULE_ID}")
        if reply.status != 200:
            self.errors.append(f"DELETE the schedule: {reply.status}: {reply.error()}")
        drain_limit = now() + max(60.0, 2 * DEADLINE_S + 40)
        suspects, looked = {}, 0.0
        while now() < drain_limit:
            self.run_due()
            with self.lock:
                waiting = [r for r in self.runs.values() if not r.ended]
            if not waiting and not self.queue:
                break
            # Runs stuck as the known bug B3 never end: not waited for once so for 10 s (a take-over would have
            # come after a lease).
            if now() - looked > 2 and len(waiting) <= 5:
                looked = now()
                for run in waiting:
                    if self.looks_stuck(run):
                        suspects.setdefault(run.id, now())
                    else:
                        suspects.pop(run.id, None)
                if waiting and not self.queue and all(now() - suspects.get(r.id, now()) > 10 for r in waiting):
                    log(f"{len(waiting)} runs look stuck (the known bug B3): not waiting for them")
                    break
            time.sleep(0.1)
        self.poll_stop = True
        poller.join()
        self.poll()
        with self.lock:
            never = [r for r in self.runs.values() if not r.ended]
        self.streams_stop_at = now() + 20
        for thread in list(self.stream_threads):
            thread.join(max(0.1, self.streams_stop_at - now()))
        self.pool.shutdown(wait=True)
        return never

    def watch_servers(self):
        """A server that exited without a fault of the soak (a crash, or a signal from outside: another session's
        cleanup) is a violation; it is started again so that the soak goes on."""
        for server in self.cluster.servers:
            with self.cluster.lock:
                gone = server.state == "up" and server.proc is not None and server.proc.poll() is not None
                if gone:
                    server.state = "down"
            if gone:
                code = server.proc.returncode
                message = (f"{server.name} exited without a fault of the soak (exit status {code}; 0 after "
                           f"SIGTERM or Ctrl-C: see server-{server.index}.log)")
                log(message)
                with self.lock:
                    self.errors.append(message)
                if not self.cluster.start(server, server.port) and not self.cluster.start(server, 0):
                    self.errors.append(f"{server.name} did not start again")

    def looks_stuck(self, run):
        """Whether `run` is `running` with only pending responses the soak's answers were accepted for (B3)."""
        reply = self.api.request("GET", f"/api/v1/runs/{q(run.id)}", limit=10)
        if reply.status != 200 or reply.body.get("status") != "running":
            return False
        pending = reply.body.get("pending") or []
        return bool(pending) and all((run.answers.get(p["id"]) or {}).get("outcome") == "accepted" for p in pending)

    def run_due(self):
        """Submits the answers (and in-doubt settlements) whose time has come."""
        while True:
            with self.lock:
                if not self.queue or self.queue[0][0] > now():
                    return
                _, _, fn, args = heapq.heappop(self.queue)
            self.submit(fn, *args)


# ---------------------------------------------------------------------------------------------------------
# The invariants

def strip_replays(events):
    """The events without the known replay B1: after a live `suspended` (no seq), journaled events already passed
    on, then `suspended` again with a seq. Returns the events left and how many replays were taken out."""
    out, replays, i = [], 0, 0
    while i < len(events):
        event = events[i]
        out.append(event)
        if event[0] == "suspended" and event[1] is None:
            seen = max((e[1] for e in out if e[0] in JOURNALED and e[1] is not None), default=0)
            j = i + 1
            while j < len(events) and events[j][0] in JOURNALED and events[j][1] is not None and events[j][1] <= seen:
                j += 1
            if j > i + 1 and j < len(events) and events[j][0] == "suspended" and events[j][1] is not None:
                replays += 1
                i = j + 1
                continue
        i += 1
    return out, replays


class Checks:
    def __init__(self):
        self.counts = Counter()
        self.violations = []
        self.known = Counter()
        self.known_examples = {}

    def ok(self, name):
        self.counts[name] += 1

    def fail(self, name, message):
        self.counts[name] += 1
        self.violations.append(f"[{name}] {message}")


def check(soak, never):
    """Every invariant, on every run the soak knows (and the scheduled runs found in the store)."""
    c = Checks()
    api = soak.api
    for message in soak.errors:
        c.fail("soak", message)
    for run in never:
        log(f"{run.id} ({run.kind}) had not ended when the drain's time was up: last seen {run.status}")

    runs = [soak.runs[i] for i in soak.order if soak.runs[i].status != "not started"]
    ledger = soak.ledger_lines()
    keys = Counter(line.get("idempotency_key") for line in ledger)

    def fetch(run):
        a = api.request("GET", f"/api/v1/runs/{q(run.id)}", timeout=15)
        other = None if a.server is None else (a.server + 1) % len(soak.cluster.servers)
        b = api.request("GET", f"/api/v1/runs/{q(run.id)}", timeout=15, server=other)
        records = api.request("GET", f"/api/v1/store/runs/{q(run.id)}/records", timeout=15)
        calls = api.request("GET", f"/api/v1/runs/{q(run.id)}/calls", timeout=15) if run.kind in LEDGER_TOOL else None
        return run, a, b, records, calls

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        fetched = list(pool.map(fetch, runs))

    for run, a, b, records, calls in fetched:
        if a.status != 200 or records.status != 200:
            c.fail("ended", f"{run.id}: GET answered {a.status} / records {records.status}")
            continue
        final = a.body
        run.final = final
        status = final["status"]
        # The same answer on two servers.
        if b.status == 200 and (b.body["status"], b.body.get("output")) != (status, final.get("output")):
            c.fail("servers agree", f"{run.id}: {status} {final.get('output')!r} on s{a.server}, "
                                    f"{b.body['status']} {b.body.get('output')!r} on s{b.server}")
        else:
            c.ok("servers agree")
        # Ended, as the spec and the soak's cancels say.
        if status not in FINALS:
            pending = final.get("pending") or []
            # B3: running, nobody executing it, every pending response one the soak's answer was accepted for.
            stuck = status == "running" and pending and all(
                p.get("kind") in ("tool_call", "budget", "in_doubt")
                and (run.answers.get(p["id"]) or {}).get("outcome") == "accepted" for p in pending)
            if stuck:
                run.stuck = True
                c.counts["ended"] += 1
                c.known["B3"] += 1
                c.known_examples.setdefault("B3", f"{run.id} is running at the end, its answered pending "
                                                  f"responses {[p['id'] for p in pending]} still listed")
            else:
                c.fail("ended", f"{run.id} is {status} at the end: pending {pending}")
            continue
        c.ok("ended")
        cancel = run.cancel["outcome"] if run.cancel else None
        answer = run.expected_answer() if run.kind in ("deadline", "deadline_fail") else None
        if status == "completed":
            if run.kind in ("deadline", "deadline_fail") and answer is None:
                ok = final["output"] in (expected_output(run.kind, run.inputs, human_answer(run.inputs["job"])),
                                         expected_output(run.kind, run.inputs, "auto"))
            else:
                ok = final["output"] == expected_output(run.kind, run.inputs, answer)
            if ok:
                c.ok("output")
            else:
                c.fail("output", f"{run.id} ({run.kind}, inputs {run.inputs}, answers {run.answers}): output "
                                 f"{final['output']!r}, expected {expected_output(run.kind, run.inputs, answer)!r}")
        elif status == "cancelled":
            if cancel in ("accepted", "unknown"):
                c.ok("cancel")
            else:
                c.fail("cancel", f"{run.id} ({run.kind}) ended cancelled but the soak did not cancel it "
                                 f"(cancel {run.cancel}); error {final.get('error')!r}")
        elif status == "failed":
            error = final.get("error") or ""
            timed_out = "timed out" in error
            may_fail = run.kind == "deadline_fail" and (
                run.plan in ("none", "late") or (run.answers.get("ask") or {}).get("outcome") != "accepted")
            if timed_out and may_fail:
                c.ok("failed as the spec says")
            else:
                c.fail("failed as the spec says", f"{run.id} ({run.kind}, plan {run.plan}, answers {run.answers}) "
                                                  f"failed: {error}")
        # A 202 cancel ends the run cancelled, unless it had completed first (or its deadline failed it first).
        if cancel == "accepted" and status not in ("cancelled", "completed"):
            if not (status == "failed" and run.kind == "deadline_fail"):
                c.fail("cancel", f"{run.id}: a cancel got 202, the run ended {status}: {final.get('error')}")
        # Every accepted answer was used: a run that ended otherwise than cancelled asks nothing any more.
        for rid, a_ in run.answers.items():
            if a_["outcome"] == "accepted":
                if status == "completed" or status == "cancelled" or (status == "failed" and rid == "ask"):
                    c.ok("answers")
                else:
                    c.fail("answers", f"{run.id}: the answer to {rid} got 202, the run ended {status}")

        # The journal: gap-free, every agent path's completion once.
        recs = records.body
        seqs = [r["seq"] for r in recs]
        if seqs != list(range(1, len(seqs) + 1)):
            c.fail("journal", f"{run.id}: the journal's seqs are {seqs}")
        done = Counter()
        for r in recs:
            inv = r.get("invocation")
            if inv is None or r.get("async_started") or r.get("failed") or inv.get("error"):
                continue
            done[(inv["agent"], inv["path"], inv.get("item"))] += 1
        twice = {k: n for k, n in done.items() if n > 1}
        by_agent = Counter()
        for (agent, _, _), n in done.items():
            by_agent[agent] += n
        expected = expected_completions(run.kind, run.inputs)
        if twice:
            c.fail("journal", f"{run.id}: completed twice: {twice}")
        elif status == "completed" and dict(by_agent) != expected:
            c.fail("journal", f"{run.id} ({run.kind}): completions {dict(by_agent)}, expected {expected}")
        elif status != "completed" and any(n > expected.get(a_, 0) for a_, n in by_agent.items()):
            c.fail("journal", f"{run.id} ({run.kind}, {status}): completions {dict(by_agent)}, at most {expected}")
        else:
            c.ok("journal")

        # The ledger: a call of effect `once` at most once, and exactly once when the run completed it itself
        # (not a fork that inherited the finished call).
        if run.kind in LEDGER_TOOL:
            mine = [line for line in ledger if (line.get("idempotency_key") or "").startswith(run.id + "/")]
            inherited = False
            if run.parent is not None and calls is not None and calls.status == 200:
                finished = [e["seq"] for e in calls.body if e.get("type") == "tool" and e.get("status") == "finished"]
                inherited = bool(finished) and min(finished) <= (run.at_seq or 0)
            wrong_tool = [line for line in mine if line.get("tool") != LEDGER_TOOL[run.kind]]
            if wrong_tool:
                c.fail("ledger", f"{run.id}: ledger lines of another tool: {wrong_tool}")
            if run.kind == "retry":
                if status == "completed" and not inherited and not mine:
                    c.fail("ledger", f"{run.id}: completed, its retry call never reached the ledger")
                else:
                    c.ok("ledger")
                c.counts["ledger: retry calls sent again"] += max(0, len(mine) - 1)
            else:
                per_key = Counter(line.get("idempotency_key") for line in mine)
                dup = {k: n for k, n in per_key.items() if n > 1}
                if dup:
                    c.fail("ledger", f"{run.id}: an effect-once call made twice: {dup}")
                elif status == "completed" and not inherited and len(mine) != 1:
                    c.fail("ledger", f"{run.id}: completed, its once call is in the ledger {len(mine)} times "
                                     f"(doubts {run.doubts})")
                elif status == "completed" and inherited and mine:
                    c.fail("ledger", f"{run.id}: a fork that inherited the finished call made it again: {mine}")
                else:
                    c.ok("ledger")
                    if status == "completed":
                        c.counts["ledger: once calls made exactly once" if not inherited
                                 else "ledger: once calls inherited by a fork, not made again"] += 1

    # Keys of the ledger that belong to no run of a ledger kind.
    known = {r.id for r in runs if r.kind in LEDGER_TOOL}
    for key in keys:
        if not key or key.split("/", 1)[0] not in known:
            c.fail("ledger", f"a ledger line of no known run: {key}")

    # The event streams: journaled events in order, each step once, one final event at the end.
    journal_by_run = {run.id: records.body for run, a, b, records, calls in fetched if records.status == 200}
    for run in runs:
        stream = run.stream
        if stream is None:
            continue
        name = "streams"
        events, replays = strip_replays(stream.events)
        finals = [e for e in events if e[0] in FINALS]
        steps = [e[1] for e in events if e[0] in ("agent_completed", "agent_failed")]
        journaled = [e[1] for e in events if e[0] in JOURNALED]
        status = run.final["status"] if run.final else None
        shown = " ".join(f"{e[0]}:{e[1]}@s{e[4]},{e[5]}" for e in stream.events)
        order = []
        if any(b_ <= a_ for a_, b_ in zip(steps, steps[1:])):
            order.append(f"steps out of order or repeated: {steps}")
        if any(b_ < a_ for a_, b_ in zip(journaled, journaled[1:])):
            order.append(f"journaled events out of order: {journaled}")
        ending = []
        if not stream.finished:
            ending.append(f"no final event ({len(events)} events, {stream.connects} connections)")
        if len(finals) != 1 or (events and events[-1][0] not in FINALS):
            ending.append(f"final events {[e[0] for e in finals]}, the last event {events[-1][0] if events else None}")
        elif finals[0][0] != status:
            ending.append(f"final event {finals[0][0]} {finals[0][3]}, the run ended {status}")
        recs = journal_by_run.get(run.id)
        if recs is not None and stream.finished:
            expected_steps = [r["seq"] for r in recs if r.get("invocation") is not None and not r.get("async_started")]
            if sorted(set(steps)) != expected_steps:
                missing = sorted(set(expected_steps) - set(steps))
                extra = sorted(set(steps) - set(expected_steps))
                ending.append(f"steps missing {missing}, not journaled {extra}")
        # B2: the stream ended with a `failed` the run's record does not say (the record unreadable then).
        spurious = bool(finals) and finals[0][0] == "failed" and status != "failed" and (
            finals[0][3].get("error") == "the run stopped")
        stuck = getattr(run, "stuck", False)  # B3: it never ended; its stream neither
        # B4: the final event came without steps journaled elsewhere, on a server paused meanwhile.
        skipped = bool(events) and len(ending) == 1 and ending[0].startswith("steps missing") and (
            "not journaled []" in ending[0]) and soak.cluster.paused_during(events[-1][4], events[0][5], events[-1][5])
        known = ["B1"] * bool(replays) + ["B2"] * spurious + ["B3"] * stuck + ["B4"] * skipped
        if order or (ending and not spurious and not stuck and not skipped):
            c.fail(name, f"{run.id} ({run.kind}, {stream.connects} connections): " + "; ".join(order + ending)
                   + f"; the events (name:seq@server,time): {shown}")
        elif known:
            c.counts[name] += 1
            for bug in known:
                c.known[bug] += 1
                c.known_examples.setdefault(bug, f"{run.id} (ended {status}): {shown}")
        else:
            c.ok(name)
        if stream.connects > 1:
            c.counts["streams reconnected"] += 1

    with open(os.path.join(soak.workdir, "streams.jsonl"), "w", encoding="utf-8") as f:
        for run in runs:
            if run.stream is not None:
                f.write(json.dumps({"run": run.id, "connects": run.stream.connects, "errors": run.stream.errors,
                                    "events": run.stream.events}) + "\n")

    # The schedule: one run per tick, none missed between the first and the last.
    ticks = sorted(r.id for r in runs if r.kind == "tick")
    stamps = []
    for run_id in ticks:
        stamp = run_id[len(SCHEDULE_ID) + 1:]
        stamps.append(time.mktime(time.strptime(stamp, "%Y%m%dT%H%M%SZ")))
    gaps = [(ticks[i], ticks[i + 1]) for i in range(len(stamps) - 1) if stamps[i + 1] - stamps[i] != SCHEDULE_EVERY_S]
    if not ticks:
        c.fail("schedule", "no scheduled run")
    elif gaps:
        c.fail("schedule", f"ticks missed or repeated between {gaps}")
    else:
        c.ok("schedule")
    return c


# ---------------------------------------------------------------------------------------------------------
# The known product bugs, reproduced alone (--repro B1 ... B4): exit 1 when the bug shows

def read_events(url, run_id, until, limit=60):
    """(name, seq, data) of GET /events on `url` until an event `until` holds, the stream ends, or `limit` s."""
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=limit)
    conn.request("GET", f"/api/v1/runs/{q(run_id)}/events")
    response = conn.getresponse()
    events, name, deadline = [], None, time.monotonic() + limit
    try:
        while time.monotonic() < deadline:
            line = response.readline().decode("utf-8", "replace").rstrip("\r\n")
            if not line and response.isclosed():
                break
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:].strip())
                events.append((name, data.get("seq"), data))
                if until(events[-1]):
                    break
    except OSError:
        pass
    finally:
        conn.close()
    return events


def repro(args, bug, postgres, workdir):
    """One server (two for B3, B4) on a fresh PostgreSQL database, and the smallest runs that show `bug`."""
    specs_dir = os.path.join(workdir, "specs")
    os.makedirs(specs_dir)
    hold = threading.Event()
    model = Model(hold=hold if bug == "B2" else None, delay=1.0 if bug == "B4" else 0)  # B3 sets its own hold
    args.servers = 2 if bug in ("B3", "B4") else 1
    cluster = Cluster(args, postgres.url, specs_dir, workdir)
    for server in cluster.servers:
        if not cluster.start(server):
            raise SystemExit(f"cluster soak: a server did not start (see {workdir}/server-*.log)")
    url = cluster.servers[0].url
    api = Api(cluster, args.seed)
    shown = 0
    if bug == "B1":
        # 50 compute steps, then a human step; the stream opened right after the 201, on the same server.
        spec = ("version: 1\nname: b1\nroot: main\nagents:\n"
                "  main: { kind: sequence, agents: [count_up, ask], output_key: answer }\n"
                "  count_up: { kind: loop, agents: [count], max_iterations: 50, output_key: n }\n"
                "  count: { kind: compute, value: \"(n if n is defined else 0) + 1\", inputs: [], output_key: n }\n"
                "  ask: { kind: human, prompt: \"ok?\", response_id: ok, output_key: answer }\n")
        for i in range(3):
            run_id = f"b1-{i}"
            reply = api.request("POST", "/api/v1/runs", {"spec": spec, "run_id": run_id})
            assert reply.status == 201, reply.body
            events = read_events(url, run_id, lambda e: e[0] == "suspended" and e[1] is not None, limit=5)
            steps = [e[1] for e in events if e[0] == "agent_completed"]
            repeated = sorted(s for s, n in Counter(steps).items() if n > 1)
            tail = " ".join(f"{e[0]}:{e[1]}" for e in events if e[0] not in ("agent_started", "planner_decision"))
            print(f"{run_id}: {len(steps)} agent_completed events for {len(set(steps))} steps, repeated: {repeated}; "
                  f"the end of the stream: ...{tail[-120:]}")
            shown += bool(repeated)
    elif bug == "B3":
        # Suspended on A (a human step, a budget, a tool call's approval), answered on B, which continues it; B
        # killed while the model's next answer is held; A should take the run over after the lease.
        models = f'models:\n  default: {{ provider: openai, base_url: "{model.url}/v1", model: gpt-test }}\n'
        cases = {
            "human": ("version: 1\nname: human\nroot: main\n" + models + "agents:\n"
                      "  main: { kind: sequence, agents: [ok, final], output_key: final }\n"
                      "  ok: { kind: human, prompt: \"ok?\", response_id: ok, output_key: answer }\n"
                      "  final: { kind: llm, user: \"final {{ answer }}\", output_key: final }\n", "yes", {}),
            "budget": ("version: 1\nname: budget\nroot: main\nbudget: { tokens: 15 }\n" + models + "agents:\n"
                       "  main: { kind: sequence, agents: [b1, b2, b3], output_key: b3 }\n"
                       "  b1: { kind: llm, user: \"b1\", output_key: b1 }\n"
                       "  b2: { kind: llm, user: \"b2\", output_key: b2 }\n"
                       "  b3: { kind: llm, user: \"b3\", output_key: b3 }\n", 1000, {}),
            "approval": ("version: 1\nname: approval\nroot: desk\n" + models + "agents:\n"
                         "  desk:\n    kind: llm\n    user: \"charge {{ amount }}\"\n    output_key: reply\n"
                         "    tools:\n      - { name: charge, parameters: { amount: integer }, "
                         "value: \"'charged ' ~ amount\", effect: once, approve: true }\n", "approve", {"amount": 7}),
        }
        a, b = cluster.servers
        for name, (spec, value, inputs) in cases.items():
            run_id = f"b3-{name}"
            model.hold = None
            assert api.request("POST", "/api/v1/runs", {"spec": spec, "run_id": run_id, "inputs": inputs},
                               server=a.index).status == 201
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                run = api.request("GET", f"/api/v1/runs/{run_id}", server=a.index).body
                if run["status"] == "suspended":
                    break
                time.sleep(0.1)
            rid = run["pending"][0]["id"]
            hold = threading.Event()
            model.hold = hold
            answered = api.request("POST", f"/api/v1/runs/{run_id}/responses/{q(rid)}", {"value": value},
                                   server=b.index)
            time.sleep(1.0)
            run = api.request("GET", f"/api/v1/runs/{run_id}", server=a.index).body
            before = f"{run['status']}, pending {[p['id'] for p in run['pending']]}"
            cluster.kill9(b)
            b.url = None
            hold.set()
            killed = time.monotonic()
            while time.monotonic() - killed < 15:
                run = api.request("GET", f"/api/v1/runs/{run_id}", server=a.index).body
                if run["status"] in FINALS:
                    break
                time.sleep(0.2)
            print(f"{name}: {rid} answered on B ({answered.status}); before B's kill: {before}; "
                  f"{time.monotonic() - killed:.1f} s after it: {run['status']}, pending "
                  f"{[p['id'] for p in run['pending']]}, output {run['output']!r}")
            shown += run["status"] not in FINALS
            if not cluster.start(b):
                raise SystemExit("cluster soak: B did not start again")
    elif bug == "B4":
        # Three model steps of 1 s each on A, streamed on A; A paused for 6 s half a second in: B takes the run
        # over and completes it; A is continued.
        spec = ("version: 1\nname: b4\nroot: main\n"
                f'models:\n  default: {{ provider: openai, base_url: "{model.url}/v1", model: gpt-test }}\n'
                "agents:\n  main: { kind: sequence, agents: [s1, s2, s3], output_key: s3 }\n"
                "  s1: { kind: llm, user: \"s1\", output_key: s1 }\n"
                "  s2: { kind: llm, user: \"s2 {{ s1 }}\", output_key: s2 }\n"
                "  s3: { kind: llm, user: \"s3 {{ s2 }}\", output_key: s3 }\n")
        a, b = cluster.servers
        for i in range(3):
            run_id = f"b4-{i}"
            assert api.request("POST", "/api/v1/runs", {"spec": spec, "run_id": run_id}, server=a.index).status == 201
            read = {}
            reader = threading.Thread(target=lambda run_id=run_id: read.setdefault(
                "events", read_events(a.url, run_id, lambda e: e[0] in FINALS, limit=40)), daemon=True)
            reader.start()
            time.sleep(0.5)
            cluster.stop(a)
            time.sleep(6)
            cluster.cont(a)
            reader.join(40)
            events = read.get("events", [])
            records = api.request("GET", f"/api/v1/store/runs/{run_id}/records", server=b.index).body
            journal = [r["seq"] for r in records if r.get("invocation")]
            steps = [e[1] for e in events if e[0] in ("agent_completed", "agent_failed")]
            shown_events = " ".join(f"{e[0]}:{e[1]}" for e in events
                                    if e[0] not in ("agent_started", "planner_decision"))
            print(f"{run_id}: journaled steps {journal}, the stream's {steps}: {shown_events}")
            shown += steps != journal
            time.sleep(2)
    else:
        if not postgres.can_restart():
            raise SystemExit("cluster soak: --repro B2 restarts PostgreSQL: it needs AGENTIC_TEST_PG_DIR")
        # 40 runs of one model step, their answers held, a stream on each; the answers released, then the
        # database restarted a moment later, while the runs end. The moment that hits the runs' ends depends on
        # the machine: up to 5 rounds, 30 to 150 ms after the release.
        spec = ("version: 1\nname: b2\nroot: main\n"
                f'models:\n  default: {{ provider: openai, base_url: "{model.url}/v1", model: gpt-test }}\n'
                "agents:\n  main: { kind: llm, user: \"hi {{ job }}\", output_key: out }\n")
        for round_, after in enumerate((0.05, 0.1, 0.03, 0.075, 0.15)):
            hold.clear()
            finals, threads = {}, []
            ids = [f"b2-{round_}-{i}" for i in range(40)]
            for run_id in ids:
                reply = api.request("POST", "/api/v1/runs", {"spec": spec, "run_id": run_id, "inputs": {"job": run_id}})
                assert reply.status == 201, reply.body

                def follow(run_id=run_id):
                    events = read_events(url, run_id, lambda e: e[0] in FINALS)
                    finals[run_id] = events[-1] if events and events[-1][0] in FINALS else None
                threads.append(threading.Thread(target=follow, daemon=True))
                threads[-1].start()
            time.sleep(2)
            hold.set()
            time.sleep(after)
            took = postgres.restart()
            for thread in threads:
                thread.join(60)
            for run_id in ids:
                record = api.request("GET", f"/api/v1/runs/{run_id}").body
                final = finals.get(run_id)
                if final is None or final[0] != record["status"]:
                    shown += 1
                    if shown <= 3:
                        print(f"{run_id}: the stream ended `{final and final[0]}` {final and final[2]}, the run's "
                              f"record says {record['status']}, output {record.get('output')!r}")
            print(f"round {round_ + 1}: the database restarted {after * 1000:.0f} ms after the model answered "
                  f"(it took {took:.1f} s): {shown} of 40 streams ended otherwise than their run's record")
            if shown:
                break
        errors = [p for p in cluster.problems if "cannot read the run's record" in p]
        print(f"the server logged `cannot read the run's record after it ended` {len(errors)} times")
    print(f"{bug}: {'shown' if shown else 'not shown'} ({KNOWN[bug]})")
    return shown == 0


# ---------------------------------------------------------------------------------------------------------

def soak_main(args, postgres, workdir, python, began):
    """The soak (the module's docstring); whether it found no violation."""
    log(f"database {postgres.db} ({'restartable' if postgres.can_restart() else 'no restart: no AGENTIC_TEST_PG_DIR'});"
        f" work dir {workdir}")
    model = Model()
    ledger_path = os.path.join(workdir, "ledger.jsonl")
    ledger_port = free_port()
    env = dict(os.environ, LEDGER=ledger_path, SLOW_MS=str(SLOW_MS))
    with open(os.path.join(workdir, "ledger.log"), "w") as ledger_log:
        CHILDREN.spawn([python, os.path.join(ROOT, "tests/peers/mcp_ledger.py"), "http", str(ledger_port)],
                       stdin=subprocess.DEVNULL, stdout=ledger_log, stderr=ledger_log, env=env)
    if not wait_port(ledger_port, 30):
        raise SystemExit("cluster soak: the MCP ledger did not listen within 30 s (see ledger.log)")
    specs_dir = os.path.join(workdir, "specs")
    os.makedirs(specs_dir)
    texts = specs(model.url, f"http://127.0.0.1:{ledger_port}/mcp")
    for name, text in texts.items():
        with open(os.path.join(specs_dir, f"{name}.yaml"), "w") as f:
            f.write(text)
    with open(os.path.join(specs_dir, "schedules.yaml"), "w") as f:
        f.write(SCHEDULES)
    cluster = Cluster(args, postgres.url, specs_dir, workdir)
    if not cluster.start(cluster.servers[0]):
        raise SystemExit(f"cluster soak: the first server did not start (see {workdir}/server-0.log)")
    rest = [threading.Thread(target=cluster.start, args=(s,)) for s in cluster.servers[1:]]
    for t in rest:
        t.start()
    for t in rest:
        t.join()
    if any(s.state != "up" for s in cluster.servers):
        raise SystemExit(f"cluster soak: a server did not start (see {workdir}/server-*.log)")
    log("servers: " + ", ".join(f"{s.name} {s.url}" for s in cluster.servers))
    api = Api(cluster, args.seed)
    soak = Soak(args, cluster, api, postgres, ledger_path, workdir, texts)
    never = soak.run()
    log("checking")
    c = check(soak, never)
    for problem in cluster.problems[:20]:
        log(f"server log: {problem}")

    runs = [soak.runs[i] for i in soak.order if soak.runs[i].status != "not started"]
    kinds = Counter(r.kind for r in runs)
    forks = sum(1 for r in runs if r.parent)
    answers = sum(1 for r in runs for a in r.answers.values() if a["outcome"] == "accepted")
    refused = sum(1 for r in runs for a in r.answers.values() if a["outcome"] == "timed_out")
    cancels = sum(1 for r in runs if r.cancel and r.cancel["outcome"] == "accepted")
    cancelled = sum(1 for r in runs if r.final and r.final["status"] == "cancelled")
    statuses = Counter(r.final["status"] for r in runs if r.final)
    doubts = Counter(how for r in runs for how, _ in r.doubts)
    streams = sum(1 for r in runs if r.stream)
    # A fixed bug seen again is a regression: never tolerated.
    for bug in FIXED:
        if c.known.get(bug):
            c.violations.append(f"the fixed product bug {bug} again, {c.known.pop(bug)} times")
    for v in c.violations[:50]:
        print(f"VIOLATION {v}", file=sys.stderr)
    if len(c.violations) > 50:
        print(f"... and {len(c.violations) - 50} more", file=sys.stderr)
    for bug, n in sorted(c.known.items()):
        print(f"KNOWN PRODUCT BUG {bug}, seen {n} times (streams; runs for B3): {KNOWN[bug]}; "
              f"e.g. {c.known_examples[bug]}",
              file=sys.stderr)
    known = sum(c.known.values())
    if args.tolerate_known or not known:
        verdict = f"{len(c.violations)} violations"
    else:
        verdict = f"{len(c.violations) + known} violations ({known} of the known product bug "
        verdict += ", ".join(sorted(c.known)) + ")"
    if args.tolerate_known and known:
        tolerated = ", ".join(f"{b} {n}" for b, n in sorted(c.known.items()))
        verdict += f" (the known product bugs tolerated: {tolerated})"
    print(f"runs by final status: {dict(statuses)}; answers refused as timed out: {refused}; "
          f"in doubt settled: {doubts.get('result', 0)} with the result, {doubts.get('retry', 0)} retried; "
          f"model calls: {sum(model.calls.values())}; ledger lines: {len(soak.ledger_lines())}; "
          f"requests tried again: {dict(api.retries)}; actions: {dict(sorted(soak.counts.items()))}; "
          f"wall time {time.monotonic() - began:.0f} s")
    invariants = ", ".join(f"{k} {n}" for k, n in sorted(c.counts.items()))
    print(f"cluster soak: {len(cluster.servers)} servers, {args.minutes:.1f} min, {len(runs)} runs (by kind "
          f"{', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}), faults: {soak.faults['kill']} kill -9, "
          f"{soak.faults['stop']} SIGSTOP, {soak.faults['db']} database restarts; answers {answers}, cancels "
          f"{cancels} ({cancelled} ended cancelled), forks {forks}, streams {streams}; invariants checked: "
          f"{invariants}; {verdict}")
    return not c.violations and (args.tolerate_known or not known)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "target/debug/agentic"))
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, ledger, actions)")
    parser.add_argument("--tolerate-known", action="store_true",
                        help="count the known product bugs (KNOWN, by their signature) apart, not as violations")
    parser.add_argument("--repro", choices=sorted(KNOWN),
                        help="reproduce one known product bug alone; exit 1 when it shows")
    args = parser.parse_args()

    python = os.environ.get("AGENTIC_PEERS_PYTHON") or os.path.join(ROOT, "target/peers/bin/python")
    if not os.path.exists(python):
        raise SystemExit(f"cluster soak: no protocol peers at {python}: run scripts/setup-peers.sh")
    if not os.path.exists(args.binary):
        raise SystemExit(f"cluster soak: no binary {args.binary}: run cargo build")

    # Ctrl-C and SIGTERM end the soak with its cleanup (SIGINT too when started where it is ignored: `cmd &`).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    workdir = tempfile.mkdtemp(prefix="agentic-cluster-soak.")
    # A copy: a build during the soak must not give the servers restarted after a kill another binary.
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.stat(args.binary).st_mtime))
    shutil.copy2(args.binary, os.path.join(workdir, "agentic"))
    args.binary = os.path.join(workdir, "agentic")
    version = subprocess.run([args.binary, "--version"], capture_output=True, text=True).stdout.strip()
    log(f"binary: {version}, built {built} UTC (copied to the work directory)")
    postgres = None
    ok = False
    began = time.monotonic()
    try:
        postgres = Postgres(args.seed)
        postgres.open()
        if args.repro:
            ok = repro(args, args.repro, postgres, workdir)
        else:
            ok = soak_main(args, postgres, workdir, python, began)
    except KeyboardInterrupt:
        print("cluster soak: interrupted", file=sys.stderr)
    finally:
        SHUTDOWN.set()
        CHILDREN.end_all()
        if postgres is not None:
            postgres.close()
        if (ok or args.repro) and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"cluster soak: work directory kept: {workdir}", file=sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
