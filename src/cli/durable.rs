//! The commands over the store (SPEC.md §2): `respond`, `resume`, `fork`, `runs`, `show`.

use std::time::{Duration, UNIX_EPOCH};

use agentic_engine::{ForkError, RunRecord, RunStatus, StoreRef};
use serde_json::{Value, json};

use super::args::{ForkArgs, RespondArgs, ResumeArgs, RunsArgs, ShowArgs};
use super::remote::{Remote, RemoteStore, error_of, segment};
use super::run::{RunEnd, print_end};
use super::run::{out, print_json, report_outcome};
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use super::{Opened, open_existing, open_store};

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| {
        eprintln!("error: cannot start the runtime: {e}");
        EXIT_FAILED
    })
}

/// The runtime and the existing store at `dir` (or the server holding it; [`super::open_existing`]: none is
/// created); the exit code after printing why not.
fn runtime_and_store(dir: &std::path::Path) -> Result<(tokio::runtime::Runtime, Opened), u8> {
    let rt = runtime()?;
    let opened = open_existing(&rt, dir)?;
    Ok((rt, opened))
}

/// Reads a run record, printing [`super::no_such_run`] when absent.
pub(crate) async fn run_record(store: &StoreRef, run_id: &str, dir: &std::path::Path) -> Result<RunRecord, u8> {
    match store.run_dyn(run_id).await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => {
            eprintln!("{}", super::no_such_run(run_id, dir));
            Err(EXIT_FAILED)
        }
        Err(e) => Err(super::store_failed(dir, &e)),
    }
}

fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `agentic respond RUN_ID [RESPONSE_ID] VALUE`: records one answer; runs nothing.
pub(crate) fn respond(args: RespondArgs) -> u8 {
    let (response_id, value) = args.answer();
    let (rt, opened) = match runtime_and_store(&args.store.store) {
        Ok(both) => both,
        Err(c) => return c,
    };
    let store = match opened {
        Opened::Local(store) => store,
        Opened::Server(remote) => {
            return rt.block_on(remote_respond(&remote, &args, response_id, value));
        }
    };
    // The same error as the other commands for an unknown run id (the engine's own names no store).
    let record = match rt.block_on(run_record(&store, &args.run_id, &args.store.store)) {
        Ok(record) => record,
        Err(code) => return code,
    };
    if rt.block_on(super::interrupted(&Opened::Local(store.clone()), &record)) {
        eprintln!(
            "error: run `{id}` was interrupted before it asked for an answer (the process running it stopped: killed \
             or crashed); continue it with `agentic resume {id}{flag}`, then answer what it asks",
            id = args.run_id,
            flag = super::store_flag(&args.store.store)
        );
        return EXIT_FAILED;
    }
    let by = cli_principal(|name| std::env::var(name).ok());
    match rt.block_on(agentic_engine::respond_as(&store, &args.run_id, response_id, value, Some(&by))) {
        Ok(id) => {
            rt.block_on(audit(&store, &by, "answer", &record, serde_json::json!({"response_id": id})));
            eprintln!(
                "answered `{id}` for run {}; continue it with: agentic resume {}{}",
                args.run_id,
                args.run_id,
                super::store_flag(&args.store.store)
            );
            EXIT_OK
        }
        Err(agentic_engine::RespondError::Store { source, .. }) => super::store_failed(&args.store.store, &source),
        // A refused answer (the wrong shape, a stale `args_hash`, a second answer, a cancelled run, ...):
        // nothing was recorded.
        Err(e) => refused(&e, &args),
    }
}

/// Appends to the store's audit that `by` did `action` to `run` (SERVER.md §8: the CLI on the store is
/// audited as a server's principals are). A store that keeps no audit, or cannot take the entry, is told on
/// stderr: the action is done.
async fn audit(store: &StoreRef, by: &str, action: &str, run: &RunRecord, detail: Value) {
    let entry = agentic_engine::AuditEntry {
        at_ms: agentic_engine::now_ms(),
        principal: by.to_string(),
        tenant: run.tenant.clone(),
        action: action.to_string(),
        run_id: Some(run.run_id.clone()),
        detail,
    };
    if let Err(e) = store.append_audit_dyn(entry).await {
        tracing::warn!("cannot append the {action} of run `{}` to the audit: {e}", run.run_id);
    }
}

/// Prints why an answer was refused (for a failed or cancelled run, with the command that asks its questions
/// again) and returns [`EXIT_FAILED`].
fn refused(e: &agentic_engine::RespondError, args: &RespondArgs) -> u8 {
    if e.run_ended_unfinished() {
        eprintln!("error: {e} (`agentic resume {}{}`)", args.run_id, super::store_flag(&args.store.store));
    } else {
        eprintln!("error: {e}");
    }
    EXIT_FAILED
}

/// Who answers from this process, as the run's journal records it (SPEC.md §4): `cli:<user>`, the user
/// being `$USER`, else `$LOGNAME`, else `unknown` (`var` reads an environment variable; empty counts as
/// unset).
pub(crate) fn cli_principal(var: impl Fn(&str) -> Option<String>) -> String {
    let user = ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|name| var(name).filter(|v| !v.trim().is_empty()))
        .next()
        .unwrap_or_else(|| "unknown".to_string());
    format!("cli:{user}")
}

/// `agentic resume RUN_ID`: rebuilds the run's spec and continues from the last checkpoint.
pub(crate) fn resume(args: ResumeArgs) -> u8 {
    let (rt, opened) = match runtime_and_store(&args.store.store) {
        Ok(both) => both,
        Err(c) => return c,
    };
    let store = match opened {
        Opened::Local(store) => store,
        Opened::Server(remote) => return rt.block_on(remote_resume(&remote, &args)),
    };
    let record = match rt.block_on(run_record(&store, &args.run_id, &args.store.store)) {
        Ok(r) => r,
        Err(code) => return code,
    };
    // Once the run is known: an unknown id gets only its error.
    eprintln!("run: {}", args.run_id);
    let by = cli_principal(|name| std::env::var(name).ok());
    let upgraded = serde_json::json!({"upgraded": args.spec.is_some()});
    rt.block_on(audit(&store, &by, "resume", &record, upgraded));
    continue_run(&rt, store, &args.store.store, &record, args.spec.as_deref(), args.json, args.stream, None)
}

/// `agentic fork RUN_ID --at SEQ`: writes a new run holding the first SEQ steps of RUN_ID, then continues it as
/// `resume` does (same output and exit codes).
pub(crate) fn fork(args: ForkArgs) -> u8 {
    if let Some(Err(e)) = args.memory_id.as_deref().map(agentic_engine::check_run_id) {
        eprintln!("error: --memory-id: {e}");
        return EXIT_USAGE;
    }
    let (rt, opened) = match runtime_and_store(&args.store.store) {
        Ok(both) => both,
        Err(c) => return c,
    };
    let store = match opened {
        Opened::Local(store) => store,
        Opened::Server(remote) => return rt.block_on(remote_fork(&remote, &args)),
    };
    // A spec the fork could not run is refused before the fork is written: the one it moves to (`--spec`,
    // below), else the source's own text, which must build here (its models, its secrets).
    if args.spec.is_none() {
        let source = match rt.block_on(run_record(&store, &args.run_id, &args.store.store)) {
            Ok(r) => r,
            Err(code) => return code,
        };
        if let Ok(pinned) = rt.block_on(agentic_spec::run_spec(&store, &source))
            && let Err(e @ agentic_spec::RunSpecError::Invalid { .. }) = pinned.build(&source.run_id)
        {
            eprintln!("error: {e}\n{}", invalid_spec_hint(&source));
            return EXIT_USAGE;
        }
    }
    if let Some(path) = args.spec.as_deref() {
        let source = match rt.block_on(run_record(&store, &args.run_id, &args.store.store)) {
            Ok(r) => r,
            Err(code) => return code,
        };
        let built = match agentic_spec::read_spec_file(path).and_then(|(_, spec)| spec.build()) {
            Ok(b) => b,
            Err(errors) => {
                eprintln!("{errors}");
                return EXIT_USAGE;
            }
        };
        match rt.block_on(agentic_spec::check_structure(&store, &source, &built, &path.display().to_string())) {
            Ok(_) => {}
            Err(e @ agentic_spec::RunSpecError::StructureChanged { .. }) => {
                eprintln!("error: {e}; fork it without --spec to continue on its own spec");
                return EXIT_USAGE;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_FAILED;
            }
        }
    }
    let record = match rt.block_on(agentic_engine::fork(&store, &args.run_id, args.at, args.memory_id.clone())) {
        Ok(r) => r,
        Err(ForkError::UnknownRun(_)) => {
            eprintln!("{}", super::no_such_run(&args.run_id, &args.store.store));
            return EXIT_FAILED;
        }
        Err(e @ ForkError::IdTaken(_)) => {
            eprintln!("error: {e}; choose another --memory-id");
            return EXIT_USAGE;
        }
        Err(e @ (ForkError::BeyondEnd { .. } | ForkError::InvalidId(_))) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILED;
        }
    };
    eprintln!("run: {}", record.run_id);
    eprintln!("forked from {} at step {}", args.run_id, args.at);
    let by = cli_principal(|name| std::env::var(name).ok());
    let forked = serde_json::json!({"run_id": record.run_id, "at_seq": args.at});
    let source = RunRecord { run_id: args.run_id.clone(), ..record.clone() };
    rt.block_on(audit(&store, &by, "fork", &source, forked));
    let tape = if args.reuse_calls {
        match rt.block_on(super::calls::reusing(&store, &args.run_id, &args.store.store)) {
            Ok(tape) => Some(tape),
            Err(code) => return code,
        }
    } else {
        None
    };
    let code =
        continue_run(&rt, store, &args.store.store, &record, args.spec.as_deref(), args.json, false, tape.clone());
    if let Some(tape) = tape {
        let stats = tape.stats();
        eprintln!("reused {} model call(s) of {}, made {}", stats.answered, args.run_id, stats.made);
    }
    code
}

/// Continues the run of `record` from its last checkpoint, rebuilding its spec (`spec`, else the one it was
/// started from), and prints the outcome: what `resume` and `fork` do once they have the run. Returns the
/// exit code.
#[allow(clippy::too_many_arguments)]
fn continue_run(
    rt: &tokio::runtime::Runtime,
    store: StoreRef,
    store_dir: &std::path::Path,
    record: &RunRecord,
    spec: Option<&std::path::Path>,
    json: bool,
    stream: bool,
    tape: Option<std::sync::Arc<agentic_engine::CallTape>>,
) -> u8 {
    let run_id = &record.run_id;
    if record.status == RunStatus::Completed {
        // Nothing to continue: print the stored result rather than starting the workflow again.
        eprintln!("run `{run_id}` completed earlier; nothing to resume");
        let outcome = json!({"run_id": run_id, "status": "completed", "output": record.detail, "pending": []});
        if json {
            print_json(&outcome);
        } else {
            match &record.detail {
                Value::String(s) => out(s),
                other => out(&other.to_string()),
            }
        }
        return EXIT_OK;
    }
    // `--spec FILE` moves the run to that text when its structure is unchanged (SERVER.md §5).
    let upgraded;
    let record = match spec {
        Some(path) => match upgrade(rt, &store, record, path) {
            Ok(r) => {
                upgraded = r;
                &upgraded
            }
            Err(code) => return code,
        },
        None => record,
    };
    let loaded = rt.block_on(agentic_spec::run_spec(&store, record));
    if spec.is_none()
        && let Ok(pinned) = &loaded
        && let Some(note) = changed_since_start(record, pinned)
    {
        eprintln!("{note}");
    }
    let built = match loaded.and_then(|s| s.build(run_id)) {
        Ok(b) => b,
        Err(agentic_spec::RunSpecError::NoSpec { .. }) => {
            eprintln!(
                "error: run `{run_id}` was not started from a spec; resume it from the program that ran it, or \
                 give the spec with --spec"
            );
            return EXIT_FAILED;
        }
        Err(e @ agentic_spec::RunSpecError::Invalid { .. }) => {
            eprintln!("error: {e}\n{}", invalid_spec_hint(record));
            return EXIT_USAGE;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILED;
        }
    };
    let interrupt = super::on_ctrl_c(rt, run_id, store_dir);
    let cancel = interrupt.cancel.clone();
    if record.cancel_requested {
        cancel.cancel();
    }
    let lease = match super::lease::take(rt, &store, run_id, &cancel) {
        Ok(lease) => lease,
        Err(code) => return code,
    };
    let mut request = built
        .root
        .resume(run_id.clone())
        .store_ref(store.clone())
        .cancel_handle(cancel.clone())
        .drain_handle(interrupt.drain.clone());
    if let Some(source) = &record.source {
        request = request.source(source.clone());
    }
    if let Some(tape) = &tape {
        request = request.call_tape(tape.clone());
    }
    let progress = super::progress::Progress::start();
    let request = match &progress {
        Some(p) => request.listener(p.clone()),
        None => request,
    };
    let result = if stream {
        super::stream::run_streamed(rt, request, progress.as_ref(), json)
    } else {
        rt.block_on(async move { request.await })
    };
    let again = || {
        let request = built
            .root
            .resume(run_id.clone())
            .store_ref(store.clone())
            .cancel_handle(cancel.clone())
            .drain_handle(interrupt.drain.clone());
        let request = match &tape {
            Some(tape) => request.call_tape(tape.clone()),
            None => request,
        };
        match &progress {
            Some(p) => request.listener(p.clone()),
            None => request,
        }
    };
    let result = super::run::sleep_through_waits(rt, result, &interrupt, again);
    if let Some(p) = &progress {
        p.finish();
    }
    if let Some(lease) = lease {
        lease.release(rt);
    }
    report_outcome(run_id, result, json)
}

/// The note `resume` prints when the file at the run's source path is no longer the text the run executes
/// (SERVER.md §5: the run keeps its text), naming the flag that applies the file; `None` when the file is
/// unchanged, gone, or the run has no archived text.
fn changed_since_start(record: &RunRecord, pinned: &agentic_spec::RunSpec) -> Option<String> {
    let (Some(hash), Some(source)) = (&record.spec_hash, &record.source) else { return None };
    let text = std::fs::read_to_string(source).ok()?;
    if pinned.archived && agentic_engine::spec_hash(&text) != *hash {
        return Some(format!(
            "note: {source} changed since the run started; the run continues on the spec text it started with \
             (--spec {source} applies the file if its structure is the same)"
        ));
    }
    None
}

/// What to do when the spec a run executes does not build: its archived text is moved to a fixed file with
/// `--spec`; a run recorded before the archive reads its file, which may have moved.
fn invalid_spec_hint(record: &RunRecord) -> String {
    let file = record.source.as_deref().unwrap_or("FILE");
    if record.spec_hash.is_some() {
        "(the text the run started with does not build here: give it what it needs from this machine, such as \
         the variables it was started with; if the text itself must change, --spec FILE moves the run to a fixed \
         spec of the same structure)"
            .to_string()
    } else if std::path::Path::new(file).exists() {
        format!("(fix {file}, or give a fixed copy with --spec FILE)")
    } else {
        format!("({file} is gone; if it moved, give it with --spec FILE)")
    }
}

/// Moves `record`'s run to the spec file `path` when its structure is unchanged; prints the refusal (what
/// changed, where) and returns the exit code otherwise.
fn upgrade(
    rt: &tokio::runtime::Runtime,
    store: &StoreRef,
    record: &RunRecord,
    path: &std::path::Path,
) -> Result<RunRecord, u8> {
    let (text, spec) = agentic_spec::read_spec_file(path).map_err(|errors| {
        eprintln!("{errors}");
        EXIT_USAGE
    })?;
    let built = spec.build().map_err(|errors| {
        eprintln!("{errors}");
        EXIT_USAGE
    })?;
    let source = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).to_string_lossy().into_owned();
    let upgraded =
        rt.block_on(agentic_spec::upgrade_run(store, record, &text, Some(source), &built, &path.display().to_string()));
    match upgraded {
        Ok(record) => {
            eprintln!("run `{}` now executes {} (the same structure)", record.run_id, path.display());
            Ok(record)
        }
        Err(e @ agentic_spec::RunSpecError::StructureChanged { .. }) => {
            eprintln!("error: {e}; resume it without --spec to continue on its own spec, or start a new run");
            Err(EXIT_USAGE)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(EXIT_FAILED)
        }
    }
}

/// `respond` through the server holding the store: the same checks and messages as without it; the server
/// records the answer and continues the run once nothing else is pending.
async fn remote_respond(remote: &Remote, args: &RespondArgs, response_id: Option<&str>, value: Value) -> u8 {
    let store: StoreRef = std::sync::Arc::new(RemoteStore(remote.clone()));
    let record = match run_record(&store, &args.run_id, &args.store.store).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let id = match agentic_engine::answerable(&record, response_id) {
        Ok(id) => id,
        Err(e) => return refused(&e, args),
    };
    // The server continues the run by itself once nothing else is pending.
    let others: Vec<&str> = record
        .open_pending()
        .iter()
        .filter(|p| p.id != id && !record.answers.contains_key(&p.id) && p.kind != agentic_engine::PendingKind::Wait)
        .map(|p| p.id.as_str())
        .collect();
    let path = format!("/api/v1/runs/{}/responses/{}", segment(&args.run_id), segment(&id));
    match remote.post(&path, &json!({"value": value})).await {
        Ok((202, _)) if others.is_empty() => {
            eprintln!(
                "answered `{id}` for run {}; the server at {} continues it by itself (`agentic show {}{}` shows \
                 where it stands)",
                args.run_id,
                remote.url(),
                args.run_id,
                super::store_flag(&args.store.store)
            );
            EXIT_OK
        }
        Ok((202, _)) => {
            eprintln!(
                "answered `{id}` for run {}; the server at {} continues it by itself once {} {} answered too",
                args.run_id,
                remote.url(),
                others.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", "),
                if others.len() == 1 { "is" } else { "are" }
            );
            EXIT_OK
        }
        Ok((status, body)) => {
            eprintln!("error: {}", error_of(&body, status));
            EXIT_FAILED
        }
        Err(e) => e.report(),
    }
}

/// `fork` through the server holding the store: the server writes the fork and continues it; the outcome is
/// printed once it stops.
async fn remote_fork(remote: &Remote, args: &ForkArgs) -> u8 {
    if args.spec.is_some() {
        eprintln!(
            "error: --spec cannot be used while the server at {} holds the store: it continues forks from the spec \
             their run recorded",
            remote.url()
        );
        return EXIT_USAGE;
    }
    let mut body = json!({"at_seq": args.at, "run_id": args.memory_id});
    if args.reuse_calls {
        body["reuse_calls"] = Value::Bool(true);
    }
    let new_id = match remote.post(&format!("/api/v1/runs/{}/fork", segment(&args.run_id)), &body).await {
        Ok((201, answer)) => answer.get("run_id").and_then(Value::as_str).unwrap_or_default().to_string(),
        Ok((404, _)) => {
            eprintln!("{}", super::no_such_run(&args.run_id, &args.store.store));
            return EXIT_FAILED;
        }
        Ok((status, answer)) => {
            let message = error_of(&answer, status);
            // The server names the field; the CLI's own wording has none.
            let message =
                message.strip_prefix("at_seq: ").or_else(|| message.strip_prefix("run_id: ")).unwrap_or(&message);
            match status {
                409 => eprintln!("error: {message}; choose another --memory-id"),
                _ => eprintln!("error: {message}"),
            }
            return if matches!(status, 400 | 409 | 422) { EXIT_USAGE } else { EXIT_FAILED };
        }
        Err(e) => return e.report(),
    };
    eprintln!("run: {new_id}");
    eprintln!("forked from {} at step {}", args.run_id, args.at);
    match remote.wait_stopped_or_cancel(&new_id).await {
        Ok(record) => print_end(&new_id, RunEnd::of_record(&record), args.json),
        Err(e) => e.report(),
    }
}

/// `resume` through the server holding the store: the server continues the run (unless it already does),
/// and the outcome is printed once it stops.
async fn remote_resume(remote: &Remote, args: &ResumeArgs) -> u8 {
    if args.spec.is_some() {
        eprintln!(
            "error: --spec cannot be used while the server at {} holds the store: it resumes runs from the spec \
             they recorded",
            remote.url()
        );
        return EXIT_USAGE;
    }
    if args.stream {
        eprintln!(
            "note: --stream is not available through a server (`agentic serve` holds the store): the output \
             follows when the run ends"
        );
    }
    let store: StoreRef = std::sync::Arc::new(RemoteStore(remote.clone()));
    let record = match run_record(&store, &args.run_id, &args.store.store).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    eprintln!("run: {}", args.run_id);
    if record.status == RunStatus::Completed {
        eprintln!("run `{}` completed earlier; nothing to resume", args.run_id);
        return print_end(&args.run_id, RunEnd::of_record(&record), args.json);
    }
    match remote.post(&format!("/api/v1/runs/{}/resume", segment(&args.run_id)), &json!({})).await {
        Ok((202, _)) => {}
        Ok((status, body)) => {
            eprintln!("error: {}", error_of(&body, status));
            return if status == 422 { EXIT_USAGE } else { EXIT_FAILED };
        }
        Err(e) => return e.report(),
    }
    match remote.wait_stopped_or_cancel(&args.run_id).await {
        Ok(record) => print_end(&args.run_id, RunEnd::of_record(&record), args.json),
        Err(e) => e.report(),
    }
}

fn run_json(r: &RunRecord) -> Value {
    json!({
        "run_id": r.run_id,
        "name": r.name,
        "status": r.status.to_string(),
        "pending": r.open_pending().iter().map(agentic_engine::PendingResponse::to_json).collect::<Vec<_>>(),
        "created_at": timestamp(r.created_at_ms),
        "updated_at": timestamp(r.updated_at_ms),
        "source": r.source,
        "spec": {"name": r.name, "hash": r.spec_hash},
        "forked_from": r.forked_from.as_ref().map(|f| json!({"run_id": f.run_id, "at_seq": f.at_seq})),
    })
}

/// `agentic runs`: one line per run, most recently updated first.
pub(crate) fn runs(args: RunsArgs) -> u8 {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(c) => return c,
    };
    let store = match open_store(&rt, &args.store.store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let runs = match rt.block_on(store.runs_dyn()) {
        Ok(r) => r,
        Err(e) => return super::store_failed(&args.store.store, &e),
    };
    if args.json {
        print_json(&Value::Array(runs.iter().map(run_json).collect()));
        return EXIT_OK;
    }
    if runs.is_empty() {
        eprintln!("no runs in store {}", super::store_label(&args.store.store));
        return EXIT_OK;
    }
    let id_w = runs.iter().map(|r| r.run_id.len()).max().unwrap_or(2).max(2);
    let name_w = runs.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    out(&format!("{:id_w$}  {:name_w$}  {:9}  {:20}  PENDING", "ID", "NAME", "STATUS", "UPDATED"));
    for r in &runs {
        let pending =
            r.open_pending().iter().map(|p| format!("{}{}", p.id, answered_note(r, &p.id))).collect::<Vec<_>>();
        let pending = pending.join(",");
        out(&format!(
            "{:id_w$}  {:name_w$}  {:9}  {:20}  {}",
            r.run_id,
            r.name,
            r.status.to_string(),
            timestamp(r.updated_at_ms),
            if pending.is_empty() { "-" } else { &pending }
        ));
    }
    EXIT_OK
}

/// `agentic show RUN_ID`: status, result or error, state, pending responses.
pub(crate) fn show(args: ShowArgs) -> u8 {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(c) => return c,
    };
    let opened = match open_existing(&rt, &args.store.store) {
        Ok(o) => o,
        Err(c) => return c,
    };
    if args.calls {
        return rt.block_on(show_calls(&opened, &args));
    }
    let store = opened.store_ref();
    let record = match rt.block_on(run_record(&store, &args.run_id, &args.store.store)) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let interrupted = rt.block_on(super::interrupted(&opened, &record));
    let image = match rt.block_on(store.load_dyn(&args.run_id)) {
        Ok(i) => i,
        Err(e) => return super::store_failed(&args.store.store, &e),
    };
    let (output, error) = match record.status {
        RunStatus::Completed => (record.detail.clone(), Value::Null),
        RunStatus::Failed => (Value::Null, record.detail.clone()),
        _ => (Value::Null, Value::Null),
    };
    let mut state: Vec<(&String, &Value)> = image.state.iter().collect();
    state.sort_by(|a, b| a.0.cmp(b.0));
    let usage = agentic_engine::budget::usage_by_agent(&image, &record.pending);
    if args.json {
        let mut v = run_json(&record);
        v["output"] = output;
        v["error"] = error;
        v["steps"] = json!(image.seq);
        v["usage"] = usage;
        v["decisions"] = json!(image.decisions.iter().map(agentic_engine::DecisionRecord::to_json).collect::<Vec<_>>());
        v["interrupted"] = json!(interrupted);
        v["state"] = Value::Object(state.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect());
        v["history"] = json!(image
            .history
            .iter()
            .map(|h| json!({"agent": h.agent, "path": h.path, "output": h.output, "attempt": h.attempt, "error": h.error}))
            .collect::<Vec<_>>());
        print_json(&v);
        return EXIT_OK;
    }
    out(&format!("run:     {}", record.run_id));
    out(&format!("name:    {}", record.name));
    if interrupted {
        out(&format!(
            "status:  running, interrupted (no process runs it; continue it with `agentic resume {}{}`)",
            record.run_id,
            super::store_flag(&args.store.store)
        ));
    } else {
        out(&format!("status:  {}", record.status));
    }
    out(&format!("updated: {}", timestamp(record.updated_at_ms)));
    out(&format!("steps:   {}", image.seq));
    if let Some(f) = &record.forked_from {
        out(&format!("forked:  from {} at step {}", f.run_id, f.at_seq));
    }
    if let Some(hash) = &record.spec_hash {
        out(&format!("spec:    {} {hash}", record.name));
    }
    let shown = |v: &Value| if args.all { v.to_string() } else { shown_value(v) };
    if !output.is_null() {
        out(&format!("output:  {}", shown(&output)));
    }
    if let Value::String(e) = &error {
        out(&format!("error:   {e}"));
    }
    let withdrawn = record.withdrawn_questions();
    if !withdrawn.is_empty() {
        let ids: Vec<String> = withdrawn.iter().map(|p| format!("`{}`", p.id)).collect();
        out(&format!(
            "asked:   {} (the run is {}: no answer is taken; `agentic resume {}{}` asks again)",
            ids.join(", "),
            record.status,
            record.run_id,
            super::store_flag(&args.store.store)
        ));
    }
    if !record.open_pending().is_empty() {
        out("pending:");
        for p in record.open_pending() {
            let (deadline, answered) = (super::run::deadline_note(p), answered_note(&record, &p.id));
            out(&format!("  {} (agent `{}`): {}{deadline}{answered}", p.id, p.agent, p.prompt));
            if let Some(call) = pending_call(p, args.all) {
                out(&format!("    {call}"));
            }
        }
    }
    if !image.decisions.is_empty() {
        out("decisions:");
        for d in &image.decisions {
            let c = &d.call;
            let what = match c.status {
                agentic_engine::ToolCallStatus::Finished if c.error.is_some() => "failed (in doubt)".to_string(),
                agentic_engine::ToolCallStatus::Finished => "answered (in doubt)".to_string(),
                agentic_engine::ToolCallStatus::Started => "retried (in doubt)".to_string(),
                other => other.as_str().to_string(),
            };
            let by = c.by.as_deref().map_or_else(String::new, |b| format!(" by {b}"));
            let detail = match (&c.message, &c.result) {
                (Some(m), _) if !m.is_empty() => format!(": {m}"),
                (_, Some(r)) => format!(" -> {}", shown(r)),
                _ => String::new(),
            };
            let call_args = shown(&c.args);
            out(&format!("  {} {} #{} {what}{by} {call_args}{detail} (step {})", d.path, c.tool, c.n, d.seq));
        }
    }
    print_usage(&usage);
    out("state:");
    let mut hidden = 0usize;
    for (k, v) in state {
        if args.all {
            out(&format!("  {k} = {v}"));
        } else if k.starts_with('_') {
            hidden += 1;
        } else {
            out(&format!("  {k} = {}", shown_value(v)));
        }
    }
    match hidden {
        0 => {}
        1 => out("(1 internal key hidden; --all shows it)"),
        n => out(&format!("({n} internal keys hidden; --all shows them)")),
    }
    EXIT_OK
}

/// ` (answered; resume to continue)` after a pending response whose answer is recorded but not yet used,
/// else nothing.
fn answered_note(record: &RunRecord, id: &str) -> &'static str {
    if record.answers.contains_key(id) { " (answered; resume to continue)" } else { "" }
}

/// The tool call a pending response of kind `tool_call` or `in_doubt` is about, as `show` prints it under
/// the response: `tool charge {"amount":3}` (to approve), `in doubt: charge {"amount":3} started <time>`.
fn pending_call(p: &agentic_engine::PendingResponse, all: bool) -> Option<String> {
    use agentic_engine::PendingKind;
    let tool = p.data.get("tool").and_then(Value::as_str).unwrap_or("?");
    let args = p.data.get("args").map_or_else(String::new, |a| if all { a.to_string() } else { shown_value(a) });
    match p.kind {
        PendingKind::ToolCall => Some(format!("tool {tool} {args}")),
        PendingKind::InDoubt => {
            let started = match p.data.get("started_at") {
                Some(Value::String(at)) => format!(" started {at}"),
                Some(Value::Null) | None => String::new(),
                Some(other) => format!(" started {other}"),
            };
            Some(format!("in doubt: {tool} {args}{started}"))
        }
        _ => None,
    }
}

/// `agentic show RUN_ID --calls`: the run's journaled calls ([`agentic_engine::calls_json`], through the
/// server's `GET /api/v1/runs/{id}/calls` when a server holds the store), as JSON or one line each
/// ([`call_line`]).
async fn show_calls(opened: &Opened, args: &ShowArgs) -> u8 {
    let calls = match opened {
        Opened::Server(remote) => {
            let path = format!("/api/v1/runs/{}/calls", segment(&args.run_id));
            match remote.get::<Vec<Value>>(&path).await {
                Ok(Some(calls)) => calls,
                Ok(None) => {
                    eprintln!("{}", super::no_such_run(&args.run_id, &args.store.store));
                    return EXIT_FAILED;
                }
                Err(e) => {
                    eprintln!("error: cannot read the calls of run `{}` from the server: {e}", args.run_id);
                    return e.exit_code();
                }
            }
        }
        Opened::Local(store) => {
            let record = match run_record(store, &args.run_id, &args.store.store).await {
                Ok(r) => r,
                Err(code) => return code,
            };
            let records = match store.records_dyn(&args.run_id).await {
                Ok(r) => r,
                Err(e) => return super::store_failed(&args.store.store, &e),
            };
            let mut names = agentic_engine::journal_agent_names(&records, &record.pending);
            if records.iter().any(|r| r.holds_calls() && !names.contains_key(&r.agent_path)) {
                // An invocation cut before it ended (a cancelled run): its spec names it.
                if let Ok(root) = agentic_spec::run_topology(store, &record).await {
                    let mut stack = vec![&root];
                    while let Some(node) = stack.pop() {
                        names.entry(node.path.clone()).or_insert_with(|| node.spec.name.clone());
                        stack.extend(node.children.iter());
                    }
                }
            }
            agentic_engine::calls_json(&records, &names)
        }
    };
    if args.json {
        print_json(&Value::Array(calls));
        return EXIT_OK;
    }
    if calls.is_empty() {
        eprintln!("run {} journaled no model turn or tool call", args.run_id);
        return EXIT_OK;
    }
    let width = |key: &str| calls.iter().map(|c| where_of(c, key).chars().count()).max().unwrap_or(0);
    let (seq_w, path_w, agent_w) = (width("seq"), width("path"), width("agent"));
    for c in &calls {
        out(&call_line(c, args.all, seq_w, path_w, agent_w));
    }
    EXIT_OK
}

/// The `seq`, `path` (with its mapper item: `root/0#1`) or `agent` of a journaled call as `show --calls`
/// prints it.
fn where_of(call: &Value, key: &str) -> String {
    match (key, &call[key]) {
        ("path", Value::String(path)) => {
            format!("{path}{}", call["item"].as_str().map(agentic_engine::item_of_layer).unwrap_or_default())
        }
        (_, Value::String(s)) => s.clone(),
        (_, Value::Null) => "?".to_string(),
        (_, other) => other.to_string(),
    }
}

/// One journaled call as `show --calls` prints it, columns padded to the widths given:
/// `7  root/1  clerk  tool charge #0  finished  {"amount":3}  -> {"ok":true}  by token` or
/// `5  root/1  clerk  model gpt-4o turn 0  calls charge` (`model gpt-4o choose` for a call besides the agent's
/// loop). Long values are cut unless `all`.
fn call_line(call: &Value, all: bool, seq_w: usize, path_w: usize, agent_w: usize) -> String {
    let value = |v: &Value| if all { v.to_string() } else { shown_value(v) };
    let text = |v: &Value| match v {
        Value::String(s) if all || s.chars().count() <= LONG_VALUE => s.clone(),
        Value::String(_) => shown_value(v),
        other => value(other),
    };
    let mut line = format!(
        "{:>seq_w$}  {:path_w$}  {:agent_w$}  ",
        where_of(call, "seq"),
        where_of(call, "path"),
        where_of(call, "agent")
    );
    match call["type"].as_str() {
        Some("tool") => {
            line.push_str(&format!(
                "tool {} #{}  {}  {}",
                call["tool"].as_str().unwrap_or("?"),
                call["n"],
                call["status"].as_str().unwrap_or("?"),
                value(&call["args"])
            ));
            if let Some(result) = call.get("result") {
                line.push_str(&format!("  -> {}", value(result)));
            }
            if let Some(error) = call.get("error") {
                line.push_str(&format!("  error: {}", text(error)));
            }
            if let Some(message) = call.get("message").filter(|m| m.as_str() != Some("")) {
                line.push_str(&format!("  message: {}", text(message)));
            }
            if let Some(by) = call["by"].as_str() {
                line.push_str(&format!("  by {by}"));
            }
        }
        Some("model") => {
            let model = call["model"].as_str().unwrap_or("?");
            match call["purpose"].as_str() {
                // A call besides the agent's loop: a summary, a supervisor's choice, a decision.
                Some(purpose) => line.push_str(&format!("model {model} {purpose}")),
                None => line.push_str(&format!("model {model} turn {}", call["turn"])),
            }
            let message = &call["response"]["message"];
            match message["content"].as_str() {
                Some(content) if !content.is_empty() => {
                    line.push_str(&format!("  {}", text(&Value::String(content.to_string()))));
                }
                _ => {
                    let tools: Vec<&str> = message["tool_calls"]
                        .as_array()
                        .map(|calls| calls.iter().filter_map(|c| c["name"].as_str()).collect())
                        .unwrap_or_default();
                    if !tools.is_empty() {
                        line.push_str(&format!("  calls {}", tools.join(", ")));
                    }
                }
            }
        }
        other => line.push_str(&format!("{} {}", other.unwrap_or("?"), value(call))),
    }
    line.trim_end().to_string()
}

/// A value whose one-line JSON is longer than this many characters is cut by `show` (without `--all`).
const LONG_VALUE: usize = 120;
/// How much of a cut value `show` keeps: characters of a string, or of the JSON text of anything else.
const KEPT: usize = 60;

/// A state value as `show` prints it: its one-line JSON, or, when that is longer than [`LONG_VALUE`]
/// characters, its start (trailing blanks dropped), an ellipsis and its length: `"Extract the fields of…" (2 431 chars)` for a
/// string (the length of the string), `{"a":[1,2,…} (512 chars)` for anything else (the length of its JSON).
/// The `usage:` section of `show`: tokens, model calls and cost per agent (with the models it called) and in
/// total, then per model (SPEC.md §3, §7); nothing for a run that called no model.
fn print_usage(usage: &Value) {
    let rows = usage["agents"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return;
    }
    let line = |u: &Value| {
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let calls = n("model_calls");
        let mut text = format!(
            "{} tokens ({} in, {} out), {calls} model call{}",
            n("tokens"),
            n("input_tokens"),
            n("output_tokens"),
            if calls == 1 { "" } else { "s" }
        );
        if let Some(c) = u["cost_usd"].as_f64() {
            text.push_str(&format!(", {}", agentic_engine::budget::usd(c)));
        }
        text
    };
    let models = |u: &Value| {
        let names: Vec<&str> = u["models"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if names.is_empty() { String::new() } else { format!(" [{}]", names.join(", ")) }
    };
    out("usage:");
    for r in &rows {
        let (agent, path) = (r["agent"].as_str().unwrap_or(""), r["path"].as_str().unwrap_or(""));
        out(&format!("  {agent} ({path}): {}{}", line(r), models(r)));
    }
    out(&format!("  total: {}", line(&usage["total"])));
    let by_model = usage["by_model"].as_array().cloned().unwrap_or_default();
    if !by_model.is_empty() {
        out("usage by model:");
        for m in &by_model {
            out(&format!("  {}: {}", m["model"].as_str().unwrap_or(""), line(m)));
        }
    }
}

fn shown_value(v: &Value) -> String {
    let text = v.to_string();
    let len = text.chars().count();
    if len <= LONG_VALUE {
        return text;
    }
    match v {
        Value::String(s) => {
            let kept: String = s.chars().take(KEPT).collect();
            let quoted = Value::String(kept.trim_end().to_string()).to_string();
            format!("{}…\" ({} chars)", &quoted[..quoted.len() - 1], grouped(s.chars().count()))
        }
        _ => format!("{}… ({} chars)", text.chars().take(KEPT).collect::<String>(), grouped(len)),
    }
}

/// `n` with its thousands separated by spaces: `2 431`, `1 048 576`.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `$USER` first, then `$LOGNAME`, then `unknown`; an empty variable counts as unset.
    #[test]
    fn the_cli_principal_names_the_user() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(cli_principal(env(&[("USER", "ada"), ("LOGNAME", "lovelace")])), "cli:ada");
        assert_eq!(cli_principal(env(&[("USER", ""), ("LOGNAME", "lovelace")])), "cli:lovelace");
        assert_eq!(cli_principal(env(&[])), "cli:unknown");
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        let shown: Vec<String> = [0, 7, 999, 1000, 2431, 65_536, 1_048_576].into_iter().map(grouped).collect();
        assert_eq!(shown, ["0", "7", "999", "1 000", "2 431", "65 536", "1 048 576"]);
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        // Up to 120 characters of JSON: unchanged.
        let short = Value::String("x".repeat(118));
        assert_eq!(shown_value(&short), short.to_string());
        assert_eq!(shown_value(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
        // A long string: its first 60 characters (escaped as JSON), an ellipsis, the string's length.
        let prompt = format!("Extract the fields of the ticket.\n{}", "Example: ".repeat(300));
        assert_eq!(
            shown_value(&Value::String(prompt)),
            r#""Extract the fields of the ticket.\nExample: Example: Example:…" (2 734 chars)"#
        );
        assert_eq!(shown_value(&Value::String("é".repeat(200))), format!("\"{}…\" (200 chars)", "é".repeat(60)));
        // Anything else: the first 60 characters of its JSON, an ellipsis, the JSON's length.
        let list = Value::Array((0..100).map(Value::from).collect());
        assert_eq!(shown_value(&list), "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,… (291 chars)");
    }
}
