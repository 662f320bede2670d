//! The command line of SPEC.md §2, as clap derive types.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::Value;

/// Actor-based agentic orchestration engine: run and validate workflow specs.
///
/// Exit codes: 0 completed, 2 suspended (waiting for a human), 1 run failed, 64 usage error or invalid spec
/// (or a missing input), 75 store or server unavailable or in use (try again), 77 credentials refused by a
/// server, 130 interrupted (a third Ctrl-C).
#[derive(Debug, Parser)]
#[command(name = "agentic", version = version(), propagate_version = true, max_term_width = 110)]
pub(crate) struct Cli {
    /// The command.
    #[command(subcommand)]
    pub(crate) command: Command,
    /// A YAML map of secret names to values: what `${secret:NAME}` in a spec refers to (a model's `api_key`).
    /// A secret not in it is read from the environment variable AGENTIC_SECRET_<NAME>.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) secrets: Option<PathBuf>,
}

/// What `agentic --version` prints after the name: the version and the cargo features this binary was built
/// with, `0.1.0 (features: local, postgres)` (`features: none` without any), so that a script can tell whether
/// it has the `local` provider (run-demo.sh does).
fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let built = [
            ("local", cfg!(feature = "local")),
            ("otel", cfg!(feature = "otel")),
            ("postgres", cfg!(feature = "postgres")),
        ];
        let features: Vec<&str> = built.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
        let features = if features.is_empty() { "none".to_string() } else { features.join(", ") };
        format!("{} (features: {features})", env!("CARGO_PKG_VERSION"))
    });
    VERSION.as_str()
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a spec's root agent and print its result.
    Run(RunArgs),
    /// Record an answer to a pending response (does not run anything).
    ///
    /// A failed or cancelled run has no pending response to answer: `agentic resume RUN_ID` continues it and
    /// asks its questions again. When `agentic serve` holds the store, the answer goes to the server, which
    /// continues the run by itself once every pending response is answered.
    #[command(override_usage = "agentic respond <RUN_ID> [RESPONSE_ID] <VALUE> [--store <DIR>]")]
    Respond(RespondArgs),
    /// Continue a suspended or interrupted run from its last checkpoint.
    Resume(ResumeArgs),
    /// Fork a run after one of its steps into a new run, and continue the new one (time travel).
    Fork(ForkArgs),
    /// List the runs in the store.
    Runs(RunsArgs),
    /// Show a run's status, state and pending responses.
    Show(ShowArgs),
    /// Print a stored run's model and tool calls as JSON lines, as `run --record` writes them (a recording
    /// that `run --replay FILE` answers a run from).
    Calls(CallsArgs),
    /// Write an HTML report of a run (or of a spec's topology).
    Report(ReportArgs),
    /// Check a spec: parse, validate and build it without running.
    Validate(ValidateArgs),
    /// Evaluate a spec over a dataset: run each case, apply the evaluators, summarise, gate (SPEC.md §6).
    ///
    /// Each case (a line `{"id", "inputs", "expected", "metadata"}` of DATASET.jsonl) is an ordinary run in
    /// the store, named `eval:<eval id>:<case id>` (`#k` for repeat k): `runs`, `show`, `report` and `fork`
    /// work on it. The evaluators are the spec's `evals:` list, or those of --evals. Exit codes: 0 every case
    /// passed (or the pass rate reached --min-pass) and no case regressed against --baseline; 1 otherwise; 64
    /// bad input (the spec, its evaluators, a dataset line, the baseline).
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        override_usage = "agentic eval <SPEC> <DATASET.jsonl> [OPTIONS]\n       agentic eval export [--spec NAME] [--status STATUS] [--limit N] [--store DIR]"
    )]
    Eval(EvalArgs),
    /// Host the store's runs behind an HTTP API and a web UI (docs/server.md): runs submitted over HTTP, live
    /// events, an inbox for human steps, schedules; in-flight runs resume at start.
    ///
    /// The specs of --specs also become MCP tools (streamable HTTP at /mcp, one tool per spec) and A2A agents
    /// (JSON-RPC at /a2a/NAME, cards at /.well-known/NAME/agent-card.json). Probes: GET /healthz answers
    /// liveness without the token; GET /readyz (with it) says whether the server should get traffic.
    /// SIGTERM or Ctrl-C drains (the steps in flight finish, at most 30 s) and says so; a second one stops at
    /// once.
    Serve(ServeArgs),
    /// Create, list and revoke API keys (docs/security.md): each key has a tenant (whose runs it reaches) and
    /// roles (viewer, approver, operator, admin). On the store directly, or through the server that holds it
    /// (then with an admin's key in $AGENTIC_KEY, or the server's token).
    Keys(KeysArgs),
}

/// `agentic keys`.
#[derive(Debug, Args)]
pub(crate) struct KeysArgs {
    #[command(subcommand)]
    pub(crate) command: KeysCommand,
}

/// `agentic keys create|list|revoke`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Create a key and print it (once: the store keeps only its hash).
    ///
    /// Prints the key alone on stdout (`agk_…`) and what it may do on stderr.
    Create(KeysCreateArgs),
    /// List the keys (revoked ones too), never their secrets.
    List(KeysListArgs),
    /// Revoke a key, by id or name: requests with it are refused from then on (within 1 s on every server of
    /// a cluster).
    Revoke(KeysRevokeArgs),
}

/// `agentic keys create`.
#[derive(Debug, Args)]
pub(crate) struct KeysCreateArgs {
    /// A name people know the key by (`alice`, `ci-bot`): the audit and answers say who by it.
    #[arg(long)]
    pub(crate) name: String,
    /// The tenant whose runs the key reaches and that the runs it starts belong to.
    #[arg(long)]
    pub(crate) tenant: String,
    /// A role: viewer, approver, operator or admin (each includes the ones before it); repeat for several.
    #[arg(long = "role", value_name = "ROLE", required = true)]
    pub(crate) roles: Vec<agentic_engine::Role>,
    /// For the approver role: the kinds of pending responses it may answer (comma-separated: human,
    /// tool_call, budget, in_doubt). Default: every kind.
    #[arg(long, value_delimiter = ',')]
    pub(crate) kinds: Vec<String>,
    /// For the approver role: the agents whose pending responses it may answer (comma-separated). Default:
    /// every agent.
    #[arg(long, value_delimiter = ',')]
    pub(crate) agents: Vec<String>,
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Print the key and its fields as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `agentic keys list`.
#[derive(Debug, Args)]
pub(crate) struct KeysListArgs {
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `agentic keys revoke`.
#[derive(Debug, Args)]
pub(crate) struct KeysRevokeArgs {
    /// The key's id (`k…`) or name.
    #[arg(value_name = "ID_OR_NAME")]
    pub(crate) key: String,
    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// The store directory when neither `--store` nor `$AGENTIC_STORE` names one.
pub(crate) const DEFAULT_STORE: &str = ".agentic";

/// Where runs are stored. Default `./.agentic`, or `$AGENTIC_STORE`.
#[derive(Debug, Args)]
pub(crate) struct StoreArg {
    /// Store directory (a sled database; one process at a time may open it), or a PostgreSQL database URL
    /// (`postgres://user@host:port/dbname`; several processes may share it).
    #[arg(
        long,
        value_name = "DIR",
        env = "AGENTIC_STORE",
        default_value = DEFAULT_STORE,
        value_parser = OsStringValueParser::new().try_map(store_location)
    )]
    pub(crate) store: PathBuf,
}

/// Journal durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DurabilityArg {
    /// Each step is flushed before the next starts.
    Sync,
    /// Flushes overlap the next step; all done before the run returns.
    Async,
    /// Written when the run ends or suspends.
    Exit,
}

impl From<DurabilityArg> for agentic_engine::Durability {
    fn from(d: DurabilityArg) -> Self {
        match d {
            DurabilityArg::Sync => agentic_engine::Durability::Sync,
            DurabilityArg::Async => agentic_engine::Durability::Async,
            DurabilityArg::Exit => agentic_engine::Durability::Exit,
        }
    }
}

/// `agentic run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The spec file (YAML or JSON); `-` reads it from standard input.
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// An input: VALUE is parsed as JSON when it is valid JSON, else taken as a string (always the text for
    /// an input the spec's `params` declare a `string`). Repeatable; wins over `--inputs`. A new run lacking an
    /// input the spec requires (declared in `params`, else read by its agents without a default) exits 64
    /// before it starts, naming the `--input` to give.
    #[arg(long = "input", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub(crate) input: Vec<(String, String)>,
    /// A JSON file holding an object of inputs.
    #[arg(long, value_name = "FILE.json")]
    pub(crate) inputs: Option<PathBuf>,
    /// The run id (memory id). Default: a new UUID.
    #[arg(long, value_name = "ID")]
    pub(crate) memory_id: Option<String>,
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Journal durability: sync (each step reaches the disk before the next), async (written behind the
    /// run, flushed before it returns), exit (written when the run ends or suspends).
    #[arg(long, value_enum, value_name = "MODE", default_value = "sync")]
    pub(crate) durability: DurabilityArg,
    /// Write a self-contained HTML report of the run when it ends or suspends.
    #[arg(long, value_name = "FILE.html")]
    pub(crate) report: Option<PathBuf>,
    /// Print one JSON object {"run_id", "status", "output", "pending"} on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the answer of the system's final agent (the root, or a sequence's last agent: an llm agent with
    /// `stream: true`) as it is produced: its tokens on stdout as they come, a newline after the last one,
    /// then the output as without --stream. With --json, one {"token": TEXT} line per token before the
    /// object. Earlier agents run as usual; a suspended or failed run prints its pending responses or error
    /// after the tokens received.
    #[arg(long)]
    pub(crate) stream: bool,
    /// Write the run's model and tool calls to FILE as JSON lines (one call a line: {"agent", "path", "n",
    /// "kind", "request", "request_hash", "response"}), when the run ends or suspends.
    #[arg(long, value_name = "FILE")]
    pub(crate) record: Option<PathBuf>,
    /// Answer each model and tool call from a recording (`--record`, `agentic calls`) instead of calling out:
    /// the call with the same agent path, number and request hash. Nothing is sent for a replayed call.
    #[arg(long, value_name = "FILE", conflicts_with = "replay_run")]
    pub(crate) replay: Option<PathBuf>,
    /// As --replay, from the calls of stored run RUN_ID (same store).
    #[arg(long, value_name = "RUN_ID")]
    pub(crate) replay_run: Option<String>,
    /// strict: a call that differs from the recording fails the run (exit 1), naming the agent, the call and
    /// the first field that differs. lenient: that call and its agent's later calls are made for real.
    #[arg(long, value_enum, value_name = "MODE", default_value = "strict")]
    pub(crate) replay_mode: ReplayModeArg,
}

/// How a replay treats a call that differs from the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReplayModeArg {
    /// The first call that differs fails the run.
    Strict,
    /// A call that differs, and its agent's later calls, are made for real.
    Lenient,
}

impl From<ReplayModeArg> for agentic_engine::ReplayMode {
    fn from(mode: ReplayModeArg) -> Self {
        match mode {
            ReplayModeArg::Strict => agentic_engine::ReplayMode::Strict,
            ReplayModeArg::Lenient => agentic_engine::ReplayMode::Lenient,
        }
    }
}

/// `agentic calls`.
#[derive(Debug, Args)]
pub(crate) struct CallsArgs {
    /// The run id.
    #[arg(value_name = "RUN_ID")]
    pub(crate) run_id: String,
    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// `agentic respond`.
#[derive(Debug, Args)]
pub(crate) struct RespondArgs {
    /// The run id.
    #[arg(value_name = "RUN_ID")]
    pub(crate) run_id: String,
    /// The answer (JSON when valid JSON, else a string), or the response id when VALUE follows (the id is
    /// optional when exactly one response is pending). It may start with `-` (`-5`, `-x`, `--weird`); an
    /// answer that is also an option of this command (`--store`, `-h`) goes after `--`.
    // Two single-value positionals rather than one `Vec` with `num_args = 1..=2`: a multi-value positional
    // that allows hyphen values swallows everything after its first value, `--store DIR` included.
    #[arg(value_name = "RESPONSE_ID|VALUE", allow_hyphen_values = true, allow_negative_numbers = true)]
    pub(crate) first: String,
    /// The answer, when the response id came first.
    #[arg(value_name = "VALUE", allow_hyphen_values = true, allow_negative_numbers = true)]
    pub(crate) second: Option<String>,
    #[command(flatten)]
    pub(crate) store: StoreArg,
}

impl RespondArgs {
    /// The response id (when given) and the answer: JSON when it is valid JSON, else the text.
    pub(crate) fn answer(&self) -> (Option<&str>, Value) {
        match &self.second {
            Some(value) => (Some(self.first.as_str()), parse_value(value)),
            None => (None, parse_value(&self.first)),
        }
    }
}

/// `agentic resume`.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// The run id.
    #[arg(value_name = "RUN_ID")]
    pub(crate) run_id: String,
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Move the run to this spec file before continuing (an edited copy of its spec: a fixed template or
    /// expression); refused when its structure differs. Without it the run continues on the spec text it
    /// started with, archived in the store.
    #[arg(long, value_name = "SPEC")]
    pub(crate) spec: Option<PathBuf>,
    /// Print one JSON object {"run_id", "status", "output", "pending"} on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the final agent's tokens as they come, then the output (as `agentic run --stream`).
    #[arg(long)]
    pub(crate) stream: bool,
}

/// `agentic fork`.
#[derive(Debug, Args)]
pub(crate) struct ForkArgs {
    /// The run to fork (it is only read).
    #[arg(value_name = "RUN_ID")]
    pub(crate) run_id: String,
    /// The last step the new run keeps: 0 (none) to the run's number of steps (`agentic show RUN_ID` prints
    /// it). The new run continues after it.
    #[arg(long, value_name = "SEQ")]
    pub(crate) at: u64,
    /// The new run's id. Default: a new UUID.
    #[arg(long, value_name = "NEW_ID")]
    pub(crate) memory_id: Option<String>,
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Move the new run to this spec file (an edited copy of the run's spec); refused when its structure
    /// differs. Without it the new run continues on the spec text the run started with.
    #[arg(long, value_name = "SPEC")]
    pub(crate) spec: Option<PathBuf>,
    /// Print one JSON object {"run_id", "status", "output", "pending"} on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Answer the new run's model calls whose request equals one of the original run's from the original's
    /// answers (no request is sent for them); the others are made.
    #[arg(long)]
    pub(crate) reuse_calls: bool,
}

/// `agentic runs`.
#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `agentic show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The run id.
    #[arg(value_name = "RUN_ID")]
    pub(crate) run_id: String,
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// Also show the internal state keys (those starting with `_`, e.g. `_context.*`, `_memory.*`) and
    /// every value in full (long values are cut otherwise).
    #[arg(long)]
    pub(crate) all: bool,
    /// Print JSON (always the whole state, internal keys and full values included).
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the run's journaled model turns and tool calls instead, one per line in journal order (with
    /// `--json`: the array `GET /api/v1/runs/{id}/calls` answers).
    #[arg(long)]
    pub(crate) calls: bool,
}

/// `agentic report`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("subject").required(true).args(["run_id", "spec"])))]
pub(crate) struct ReportArgs {
    /// The run to report on (its topology is drawn from the spec text the run archived).
    #[arg(value_name = "RUN_ID")]
    pub(crate) run_id: Option<String>,
    /// Report a spec's topology instead of a run (none of its model providers is needed).
    #[arg(long, value_name = "SPEC")]
    pub(crate) spec: Option<PathBuf>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// `agentic serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) store: StoreArg,
    /// The address to listen on: `IP:PORT`, `HOST:PORT` (`localhost:7878`) or a port alone (on 127.0.0.1).
    /// An address that is not loopback needs a token (--token-env).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7878", value_parser = listen_addr)]
    pub(crate) listen: std::net::SocketAddr,
    /// A directory of specs offered by name (file stem) to `POST /api/v1/runs {"spec_name": ..}`, the web
    /// UI's new-run form and schedules, and as MCP tools (at /mcp) and A2A agents (at /a2a/NAME); its
    /// `schedules.yaml`, if any, lists schedules (loaded at start).
    #[arg(long, value_name = "DIR")]
    pub(crate) specs: Option<PathBuf>,
    /// The environment variable holding the bearer token every request must carry.
    #[arg(long, value_name = "NAME", default_value = "AGENTIC_TOKEN")]
    pub(crate) token_env: String,
    /// How long a run's lease lasts, in milliseconds (a PostgreSQL store shared by several servers).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub(crate) lease_ms: u64,
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
}

/// `agentic eval`.
#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// `agentic eval export`.
    #[command(subcommand)]
    pub(crate) command: Option<EvalCommand>,
    /// The spec file (YAML or JSON).
    #[arg(value_name = "SPEC", required = true)]
    pub(crate) spec: Option<PathBuf>,
    /// The dataset: JSON lines `{"id": .., "inputs": {..}, "expected": .., "metadata": {..}}`, one case a line.
    #[arg(value_name = "DATASET.jsonl", required = true)]
    pub(crate) dataset: Option<PathBuf>,
    /// The evaluators: a YAML list (or a mapping with `evals:`), instead of the spec's `evals:`.
    #[arg(long, value_name = "FILE.yaml")]
    pub(crate) evals: Option<PathBuf>,
    /// Run each case N times: a case passes when one of its runs passes (pass@N); one with some but not
    /// all runs passing is reported flaky.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) repeat: u32,
    /// Runs at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) concurrency: u32,
    /// Pass (exit 0) when at least this share of the cases passes (0 to 1), instead of all of them.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub(crate) min_pass: Option<f64>,
    /// The results of an earlier evaluation (--out): a case that passed there and fails now is a
    /// regression, named, and fails the evaluation (exit 1).
    #[arg(long, value_name = "RESULTS.json")]
    pub(crate) baseline: Option<PathBuf>,
    /// Write the results document (what --json prints) to this file.
    #[arg(long, value_name = "RESULTS.json")]
    pub(crate) out: Option<PathBuf>,
    /// Write an HTML page of the results.
    #[arg(long, value_name = "FILE.html")]
    pub(crate) report: Option<PathBuf>,
    /// Print the results document as one JSON object on stdout instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Answer every case's model and tool calls from a recording written by `agentic eval --record` (each
    /// line names its case): nothing is sent for a replayed call (docs/recordings.md).
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub(crate) replay: Option<PathBuf>,
    /// Write every case's model and tool calls to FILE as JSON lines, each naming its case.
    #[arg(long, value_name = "FILE")]
    pub(crate) record: Option<PathBuf>,
    /// With --replay: strict (a call that differs fails its case, naming the agent, the call and the field) or
    /// lenient (that call and its agent's later calls are made for real).
    #[arg(long, value_enum, value_name = "MODE", default_value = "strict", requires = "replay")]
    pub(crate) replay_mode: ReplayModeArg,
    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// The subcommands of `agentic eval`.
#[derive(Debug, Subcommand)]
pub(crate) enum EvalCommand {
    /// Print stored runs as dataset lines: `{"id": <run id>, "inputs": .., "expected": <its output>,
    /// "metadata": {"name", "status", "created_at"}}`, oldest first.
    Export(EvalExportArgs),
}

/// `agentic eval export`.
#[derive(Debug, Args)]
pub(crate) struct EvalExportArgs {
    /// Only the runs of the spec so named (`agentic runs` shows the names).
    #[arg(long, value_name = "NAME")]
    pub(crate) spec: Option<String>,
    /// Only the runs in this status: completed, failed, suspended, cancelled or running.
    #[arg(long, value_name = "STATUS", default_value = "completed", value_parser = run_status)]
    pub(crate) status: agentic_engine::RunStatus,
    /// At most N runs, the most recent.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// `--min-pass`: a number from 0 to 1.
fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("`{text}`: expected a share of the cases from 0 to 1 (e.g. 0.9)")),
    }
}

/// `--status`: a run status by name.
fn run_status(text: &str) -> Result<agentic_engine::RunStatus, String> {
    text.parse::<agentic_engine::RunStatus>()
}

/// `agentic validate`.
#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// The spec file (YAML or JSON); `-` reads it from standard input.
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
}

/// Parses a CLI value: JSON when it is valid JSON, otherwise the text as a string.
pub(crate) fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Parses `KEY=VALUE` (split at the first `=`; the key must not be empty). The value stays text: how it is
/// read depends on the spec's `params` (`run::collect_inputs`).
fn parse_key_value(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        Some(_) => Err(format!("`{arg}`: the key before `=` is empty")),
        None => Err(format!("`{arg}`: expected KEY=VALUE")),
    }
}

/// The forms `--store` accepts, for its error message.
const STORE_FORMS: &str =
    "expected a directory (the sled store, e.g. ./runs) or a PostgreSQL URL (postgres://... or postgresql://...)";

/// `--store` (and `$AGENTIC_STORE`): a directory, or a PostgreSQL URL. A value that starts with another URL
/// scheme (`sled:./runs`, `sqlite://runs.db`, `http://host`) is refused: taken as a directory, it would create
/// a directory named like the scheme (`sled:`) in the working directory.
fn store_location(value: OsString) -> Result<PathBuf, String> {
    if value.to_str().is_some_and(|t| t.trim().is_empty()) {
        return Err(format!(
            "the store is empty; {STORE_FORMS}, or leave --store and $AGENTIC_STORE out for ./.agentic"
        ));
    }
    if let Some(text) = value.to_str()
        && let Some(scheme) = url_scheme(text)
        && !agentic_store::is_postgres_url(text)
    {
        return Err(format!("unknown store scheme `{scheme}:`; {STORE_FORMS}"));
    }
    Ok(PathBuf::from(value))
}

/// The scheme of `text` when it starts like a URL (`^[a-zA-Z][a-zA-Z0-9+.-]*:`), without the colon.
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))).then_some(scheme)
}

/// `--listen`: an `IP:PORT`, a `HOST:PORT` resolved now (its first address), or a port alone on 127.0.0.1.
fn listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(addr) = text.parse::<std::net::SocketAddr>() {
        return Ok(addr);
    }
    if let Ok(port) = text.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let expected = "expected IP:PORT, HOST:PORT or PORT (e.g. 127.0.0.1:7878, localhost:7878, 7878)";
    if !text.contains(':') {
        return Err(format!("no port in `{text}`: {expected}"));
    }
    let mut addrs = text.to_socket_addrs().map_err(|e| format!("cannot resolve `{text}`: {e}; {expected}"))?;
    addrs.next().ok_or_else(|| format!("`{text}` resolves to no address; {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use serde_json::json;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The store `agentic runs ARGS..` names, or clap's error message.
    fn store(args: &[&str]) -> Result<PathBuf, String> {
        let cli = Cli::try_parse_from([&["agentic", "runs"], args].concat()).map_err(|e| e.to_string())?;
        let Command::Runs(r) = cli.command else { panic!("not runs: {:?}", cli.command) };
        Ok(r.store.store)
    }

    #[test]
    fn store_takes_a_directory_or_a_postgres_url_and_refuses_other_schemes() {
        for dir in ["runs", "./runs", "/tmp/runs", "../a:b", "runs/sled:x", "9:x", ".agentic"] {
            assert_eq!(store(&["--store", dir]), Ok(PathBuf::from(dir)));
        }
        for url in ["postgres://u@h:5432/db", "postgresql://u@h/db"] {
            assert_eq!(store(&["--store", url]), Ok(PathBuf::from(url)));
        }
        for (value, scheme) in [
            ("sled:./runs", "sled"),
            ("sled:runs", "sled"),
            ("sqlite://runs.db", "sqlite"),
            ("http://127.0.0.1:7878", "http"),
            ("postgres:db", "postgres"),
            ("my+store.v1-x:", "my+store.v1-x"),
        ] {
            assert_eq!(
                store(&["--store", value]),
                Err(format!(
                    "error: invalid value '{value}' for '--store <DIR>': unknown store scheme `{scheme}:`; expected a \
                     directory (the sled store, e.g. ./runs) or a PostgreSQL URL (postgres://... or postgresql://...)\n\n\
                     For more information, try '--help'.\n"
                ))
            );
        }
    }

    #[test]
    fn listen_takes_an_address_a_host_or_a_port() {
        assert_eq!(listen_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(listen_addr("[::1]:7878").unwrap().to_string(), "[::1]:7878");
        assert_eq!(listen_addr("9000").unwrap().to_string(), "127.0.0.1:9000");
        assert!(listen_addr("localhost:7878").unwrap().ip().is_loopback());
        assert_eq!(
            listen_addr("localhost").unwrap_err(),
            "no port in `localhost`: expected IP:PORT, HOST:PORT or PORT (e.g. 127.0.0.1:7878, localhost:7878, 7878)"
        );
    }

    /// Parses `agentic respond ARGS..` into (run id, response id, answer, store).
    fn respond(args: &[&str]) -> Result<(String, Option<String>, Value, PathBuf), clap::Error> {
        let cli = Cli::try_parse_from([&["agentic", "respond"], args].concat())?;
        let Command::Respond(r) = cli.command else { panic!("not respond: {:?}", cli.command) };
        let (id, value) = r.answer();
        Ok((r.run_id.clone(), id.map(str::to_string), value, r.store.store))
    }

    #[test]
    fn respond_takes_answers_that_start_with_a_hyphen() {
        let dir = PathBuf::from("/tmp/s");
        for (answer, value) in
            [("-5", json!(-5)), ("-x", json!("-x")), ("--weird", json!("--weird")), ("-", json!("-"))]
        {
            // RUN_ID VALUE and RUN_ID RESPONSE_ID VALUE, with --store before, after or not at all.
            assert_eq!(respond(&["r1", answer]).unwrap().2, value, "{answer}");
            for args in [
                vec!["--store", "/tmp/s", "r1", "id", answer],
                vec!["r1", "id", answer, "--store", "/tmp/s"],
                vec!["r1", "--store", "/tmp/s", "id", answer],
                vec!["--store=/tmp/s", "r1", "id", answer],
            ] {
                let parsed = respond(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert_eq!(parsed, ("r1".to_string(), Some("id".to_string()), value.clone(), dir.clone()), "{args:?}");
            }
            for args in [vec!["--store", "/tmp/s", "r1", answer], vec!["r1", answer, "--store", "/tmp/s"]] {
                let parsed = respond(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert_eq!(parsed, ("r1".to_string(), None, value.clone(), dir.clone()), "{args:?}");
            }
        }
        // A response id may start with a hyphen too; `--` still ends the options.
        assert_eq!(respond(&["r1", "-id", "-5"]).unwrap().1.as_deref(), Some("-id"));
        assert_eq!(respond(&["r1", "--", "--store"]).unwrap().2, json!("--store"));
        assert_eq!(respond(&["r1", "id", "--", "-h"]).unwrap().2, json!("-h"));
    }

    #[test]
    fn respond_still_rejects_unknown_options_before_the_run_id_and_extra_values() {
        let err = respond(&["--weird", "r1", "yes"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(err.to_string().contains("unexpected argument '--weird' found"), "{err}");
        let err = respond(&["-x", "r1", "yes"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(err.to_string().contains("unexpected argument '-x' found"), "{err}");
        let err = respond(&["r1"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let err = respond(&["r1", "id", "-5", "extra"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        let err = respond(&["r1", "-5", "--store"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue, "{err}");
    }

    #[test]
    fn values_are_json_when_valid() {
        assert_eq!(parse_value("5"), json!(5));
        assert_eq!(parse_value("[1, \"a\"]"), json!([1, "a"]));
        assert_eq!(parse_value("\"5\""), json!("5"));
        assert_eq!(parse_value("hello world"), json!("hello world"));
        assert_eq!(parse_value(""), json!(""));
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".to_string(), "b=c".to_string())));
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=3").is_err());
    }
}
