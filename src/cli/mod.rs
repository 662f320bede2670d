//! Argument parsing and dispatch. Usage errors exit 64 (not clap's default 2, which means "suspended").

mod args;
mod calls;
mod crash;
mod durable;
mod eval;
mod keys;
mod lease;
mod progress;
mod remote;
mod report;
mod run;
mod serve;
mod stream;
mod validate;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

pub(crate) use args::{Cli, Command};

/// Exit code: the run completed.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: the run failed.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code: the run is suspended, waiting for a human.
pub(crate) const EXIT_SUSPENDED: u8 = 2;
/// Exit code: usage error or invalid spec.
pub(crate) const EXIT_USAGE: u8 = 64;
/// Exit code: the store or the server is unavailable or in use; try again (SPEC.md §2).
pub(crate) const EXIT_UNAVAILABLE: u8 = 75;
/// Exit code: a server refused the credentials (no token, or the wrong one; SPEC.md §2).
pub(crate) const EXIT_REFUSED: u8 = 77;

/// The handles Ctrl-C (SIGINT) works through for the run the CLI is about to make ([`on_ctrl_c`]).
#[derive(Clone)]
pub(crate) struct Interrupt {
    /// Cancelled by the second Ctrl-C (or once the first one's drain stopped the run).
    pub(crate) cancel: agentic_engine::CancelHandle,
    /// Drained by the first Ctrl-C: the steps in flight finish (a model call answered is counted and kept).
    pub(crate) drain: agentic_engine::DrainHandle,
}

/// Ctrl-C for the run the CLI is about to make: the first Ctrl-C (SIGINT) lets the steps in flight finish
/// (a model call under way is paid for: its answer is kept, counted and not asked again) and starts no new
/// one, then the run is cancelled — recorded `cancelled`, so `agentic resume` continues it
/// ([`finish_interrupted`]); a second Ctrl-C cancels the steps in flight too; a third exits at once with
/// status 130, as an interrupted process does.
pub(crate) fn on_ctrl_c(runtime: &tokio::runtime::Runtime, run_id: &str, store: &std::path::Path) -> Interrupt {
    let handles = Interrupt { cancel: agentic_engine::CancelHandle::new(), drain: agentic_engine::DrainHandle::new() };
    let Interrupt { cancel, drain } = handles.clone();
    let run_id = run_id.to_string();
    let flag = store_flag(store);
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!(
            "interrupted: cancelling run `{run_id}` once the steps in flight finish (Ctrl-C again to stop them \
             now); `agentic resume {run_id}{flag}` continues it"
        );
        drain.drain();
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!("cancelling the steps in flight (Ctrl-C again to exit at once)");
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(130);
        }
    });
    handles
}

/// A run the first Ctrl-C drained ([`on_ctrl_c`]) is cancelled now that its steps in flight finished: `again`
/// (its resume request, with the cancelled handle) records it `cancelled` without starting a step. Any
/// other outcome is returned as is.
pub(crate) fn finish_interrupted(
    rt: &tokio::runtime::Runtime,
    result: Result<agentic_engine::RunOutcome, agentic_engine::AgentError>,
    interrupt: &Interrupt,
    again: impl Fn() -> agentic_engine::InvokeRequest,
) -> Result<agentic_engine::RunOutcome, agentic_engine::AgentError> {
    match &result {
        Ok(agentic_engine::RunOutcome { result: agentic_engine::RunResult::Drained, .. })
            if interrupt.drain.is_draining() =>
        {
            interrupt.cancel.cancel();
            let request = again();
            rt.block_on(async move { request.await })
        }
        _ => result,
    }
}

/// Parses the command line and runs the command.
pub(crate) fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `e.print()` writes help/version to stdout and errors to stderr.
            let _ = e.print();
            return ExitCode::from(match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => EXIT_OK,
                _ => EXIT_USAGE,
            });
        }
    };
    if let Some(file) = &cli.secrets {
        match agentic_spec::Secrets::from_file(file) {
            Ok(secrets) => secrets.install(),
            Err(e) => {
                eprintln!("error: --secrets: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    #[cfg(feature = "otel")]
    let _telemetry = init_tracing();
    #[cfg(not(feature = "otel"))]
    init_tracing();
    let code = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Validate(args) => validate::validate(&args),
        Command::Respond(args) => durable::respond(args),
        Command::Resume(args) => durable::resume(args),
        Command::Fork(args) => durable::fork(args),
        Command::Runs(args) => durable::runs(args),
        Command::Show(args) => durable::show(args),
        Command::Calls(args) => calls::calls(args),
        Command::Report(args) => report::report(args),
        Command::Serve(args) => serve::serve(args),
        Command::Eval(args) => eval::eval(args),
        Command::Keys(args) => keys::keys(args),
    };
    ExitCode::from(code)
}

/// Logs to stderr, filtered by `AGENTIC_LOG` (default `warn`; the SDKs' lines only when named,
/// [`agentic_agents::log_directives`]); colours only on a terminal (a log file or a
/// journal gets plain text).
#[cfg(not(feature = "otel"))]
fn init_tracing() {
    use std::io::IsTerminal;
    // Warnings by default; the SDKs' own lines (a server's raw replies, credentials included) only when named.
    let user = std::env::var("AGENTIC_LOG").ok();
    let filter = tracing_subscriber::EnvFilter::new(agentic_agents::log_directives(user.as_deref()));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    if let Some(var) = OTLP_VARS.iter().find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())) {
        eprintln!(
            "note: ${var} is set, but this agentic is built without the `otel` feature: no span is exported \
             (cargo build --release --features otel; docs/telemetry.md)"
        );
    }
}

/// The variables that ask for an OTLP export (docs/telemetry.md), which a build without `otel` cannot do.
#[cfg(not(feature = "otel"))]
const OTLP_VARS: [&str; 2] = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"];

/// Logs to stderr, filtered by `AGENTIC_LOG` (default `warn`), and exports the spans over OTLP when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see [`crate::telemetry`]). The guard flushes on drop.
#[cfg(feature = "otel")]
fn init_tracing() -> Option<crate::telemetry::OtlpGuard> {
    match crate::telemetry::init_from_env() {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("agentic: {e}; spans are not exported");
            None
        }
    }
}

/// Prints why the store at `store` failed and returns the exit code: [`EXIT_UNAVAILABLE`] with `error: store
/// STORE is unreachable: WHY; try again once it is back` when it could not be reached (or `error: store STORE is
/// in use by another process; try again once it is free`, or `error: the server at URL does not answer: WHY;
/// try again once it is back` for the server holding it), [`EXIT_REFUSED`] when that server refused the token,
/// else [`EXIT_FAILED`] with the error.
pub(crate) fn store_failed(store: &std::path::Path, e: &agentic_engine::StoreError) -> u8 {
    use agentic_engine::StoreError;
    match e {
        StoreError::Unavailable { backend: "sled", message, .. } => {
            eprintln!("error: {message}; try again once it is free");
            EXIT_UNAVAILABLE
        }
        StoreError::Unavailable { backend: "server", message, .. } => {
            eprintln!("error: {message}; try again once it is back");
            EXIT_UNAVAILABLE
        }
        StoreError::Backend { source: Some(source), .. }
            if matches!(source.downcast_ref::<remote::RemoteError>(), Some(remote::RemoteError::Refused(_))) =>
        {
            eprintln!("error: {source}");
            EXIT_REFUSED
        }
        StoreError::Unavailable { source, .. } => {
            let why = source.as_ref().map_or_else(|| "no answer".to_string(), |s| error_chain(&**s));
            eprintln!("error: store {} is unreachable: {why}; try again once it is back", store_label(store));
            EXIT_UNAVAILABLE
        }
        e => {
            eprintln!("error: {e}");
            EXIT_FAILED
        }
    }
}

/// `e` and its sources, `: `-separated, each said once (a driver's error often repeats its source's text).
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(source) = next {
        let said = source.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = source.source();
    }
    text
}

/// The one error for a run id the store does not hold (`respond`, `resume`, `fork`, `show`, `report`; exit
/// [`EXIT_FAILED`]): it names the id and the store and says how to list the runs there (`--store` included
/// unless the store is the default one).
pub(crate) fn no_such_run(run_id: &str, dir: &std::path::Path) -> String {
    let shown = store_label(dir);
    format!("error: no run `{run_id}` in store {shown}; list its runs with `agentic runs{}`", store_flag(dir))
}

/// ` --store DIR` (the directory as one shell word) for a command to print, empty for the default store.
pub(crate) fn store_flag(dir: &std::path::Path) -> String {
    if dir == std::path::Path::new(args::DEFAULT_STORE) {
        String::new()
    } else {
        format!(" --store {}", shell_word(&store_label(dir)))
    }
}

/// Whether `record`'s run is marked `running` while no process executes it (the `agentic` that ran it was
/// killed or crashed): on a sled store this process opened, any running run (sled lets one process open a
/// store); on a shared store, one whose lease expired or was released. A server's runs are never.
pub(crate) async fn interrupted(opened: &Opened, record: &agentic_engine::RunRecord) -> bool {
    if record.status != agentic_engine::RunStatus::Running {
        return false;
    }
    match opened {
        Opened::Server(_) => false,
        Opened::Local(store) if !store.shared_dyn() => true,
        Opened::Local(store) => store
            .takeover_candidates_dyn()
            .await
            .is_ok_and(|runs| runs.iter().any(|r| r.run_id == record.run_id && r.status == record.status)),
    }
}

/// The store as messages show it: the directory, or the PostgreSQL URL with its password hidden.
pub(crate) fn store_label(store: &std::path::Path) -> String {
    let text = store.display().to_string();
    if agentic_store::is_postgres_url(&text) { agentic_store::redact_url(&text) } else { text }
}

/// `text` as one shell word: unchanged when it has only safe characters, else in single quotes.
fn shell_word(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:=,@%".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A store as a command reaches it: opened here, or held by a running `agentic serve`.
pub(crate) enum Opened {
    /// Opened by this process.
    Local(agentic_engine::StoreRef),
    /// Held by the server advertised in the store directory.
    Server(remote::Remote),
}

impl Opened {
    /// The store to read: the local one, or the server's, read through it.
    pub(crate) fn store_ref(&self) -> agentic_engine::StoreRef {
        match self {
            Opened::Local(store) => store.clone(),
            Opened::Server(remote) => std::sync::Arc::new(remote::RemoteStore(remote.clone())),
        }
    }
}

/// Opens the store `--store` names on `rt` (whose tasks run the connections of a PostgreSQL store): a
/// PostgreSQL database for a `postgres://` or `postgresql://` URL, else the sled store in directory `dir`, or,
/// when another process holds it and a server advertises itself there, that server. On failure prints the
/// error and returns the exit code ([`store_failed`]: 75 when the store is unreachable or in use, else 1).
pub(crate) fn open(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> Result<Opened, u8> {
    if let Some(url) = dir.to_str().filter(|d| agentic_store::is_postgres_url(d)) {
        return open_postgres(rt, url).map(|s| Opened::Local(crash::arm(s)));
    }
    match agentic_store::SledStore::open(dir) {
        Ok(s) => Ok(Opened::Local(crash::arm(s.store_ref()))),
        Err(e) => match remote::Remote::find(dir) {
            Some(remote) => Ok(Opened::Server(remote)),
            None => Err(store_failed(dir, &e)),
        },
    }
}

/// Connects to the PostgreSQL store at `url` (its schema migrated to this build's).
#[cfg(feature = "postgres")]
fn open_postgres(rt: &tokio::runtime::Runtime, url: &str) -> Result<agentic_engine::StoreRef, u8> {
    match rt.block_on(agentic_store::PgStore::connect(url)) {
        Ok(store) => Ok(match lease::lease_time_from_env() {
            // The owner id as a server's: distinct per process.
            Some(time) => {
                let owner = format!("cli-pid-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple());
                store.with_lease(owner, time).store_ref()
            }
            None => store.store_ref(),
        }),
        Err(e) => Err(store_failed(std::path::Path::new(url), &e)),
    }
}

/// A build without the `postgres` feature refuses a PostgreSQL URL.
#[cfg(not(feature = "postgres"))]
fn open_postgres(_: &tokio::runtime::Runtime, url: &str) -> Result<agentic_engine::StoreRef, u8> {
    eprintln!(
        "error: store {}: this agentic was built without the `postgres` feature (cargo build --features postgres)",
        agentic_store::redact_url(url)
    );
    Err(EXIT_FAILED)
}

/// [`open`] for the commands about runs already stored (`runs`, `show`, `report RUN`, `respond`, `resume`,
/// `fork`), which never create a store: a directory holding no sled store is not opened. The default store
/// (`./.agentic`, absent until the first run) then reads as an empty one (no runs yet); any other is an error
/// (exit 1): `error: no store at DIR (no such directory); runs are kept in ./.agentic unless --store or
/// $AGENTIC_STORE names another store` (or `(the directory holds no agentic store)`). A PostgreSQL URL is
/// opened as by [`open`].
pub(crate) fn open_existing(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> Result<Opened, u8> {
    let postgres = dir.to_str().is_some_and(agentic_store::is_postgres_url);
    // sled keeps its data in the file `db` of the store's directory.
    if postgres || dir.join("db").is_file() {
        return open(rt, dir);
    }
    if dir == std::path::Path::new(args::DEFAULT_STORE) {
        return Ok(Opened::Local(agentic_store::MemoryStore::new().store_ref()));
    }
    let why = if dir.is_dir() { "the directory holds no agentic store" } else { "no such directory" };
    eprintln!(
        "error: no store at {} ({why}); runs are kept in ./{} unless --store or $AGENTIC_STORE names another store",
        store_label(dir),
        args::DEFAULT_STORE
    );
    Err(EXIT_FAILED)
}

/// [`open_existing`], for the commands that only read the store (through the server when one holds it).
pub(crate) fn open_store(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> Result<agentic_engine::StoreRef, u8> {
    open_existing(rt, dir).map(|o| o.store_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unknown_run_error_names_the_store_and_how_to_list_it() {
        let dir = std::path::Path::new;
        assert_eq!(
            no_such_run("r1", dir(".agentic")),
            "error: no run `r1` in store .agentic; list its runs with `agentic runs`"
        );
        assert_eq!(
            no_such_run("r1", dir("/tmp/runs")),
            "error: no run `r1` in store /tmp/runs; list its runs with `agentic runs --store /tmp/runs`"
        );
        assert_eq!(
            no_such_run("r1", dir("/tmp/my runs")),
            "error: no run `r1` in store /tmp/my runs; list its runs with `agentic runs --store '/tmp/my runs'`"
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
