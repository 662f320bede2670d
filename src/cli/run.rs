//! `agentic run SPEC`: build the spec, invoke its root agent, print the outcome (SPEC.md §2).

use agentic_engine::{AgentError, InvokeRequest, PendingKind, PendingResponse, RunOutcome, RunResult};
use agentic_spec::Spec;
use serde_json::{Map, Value, json};

use super::args::RunArgs;
use super::{EXIT_FAILED, EXIT_OK, EXIT_SUSPENDED, EXIT_USAGE};

/// Runs the spec; returns the exit code.
pub(crate) fn run(args: RunArgs) -> u8 {
    let (text, spec) = match agentic_spec::read_spec_file(&args.spec) {
        Ok(read) => read,
        Err(errors) => {
            eprintln!("{errors}");
            return EXIT_USAGE;
        }
    };
    // A server holding the store builds the spec with its own models (its environment, not this one's): here
    // a build the models' providers fail is enough for the checks, unless this process runs the spec itself.
    let mut not_here = None;
    // A replay answers every model call from its recording: a model this binary cannot build (`provider:
    // local` without the feature) stands in under the name it would report.
    let replaying = args.replay.is_some() || args.replay_run.is_some();
    let built = if replaying { spec.build_for_replay() } else { spec.build() };
    let built = match built {
        Ok(built) => built,
        Err(errors) => match super::remote::Remote::find(&args.store.store).map(|_| spec.build_with_stand_ins()) {
            Some(Ok(built)) => {
                not_here = Some(errors);
                built
            }
            _ => {
                eprintln!("{errors}");
                return EXIT_USAGE;
            }
        },
    };
    if let Some(message) = pending_human(&spec) {
        eprintln!("{message}");
        return EXIT_USAGE;
    }
    let mut inputs = match collect_inputs(&args, &spec) {
        Ok(i) => i,
        Err(message) => {
            eprintln!("error: {message}");
            return EXIT_USAGE;
        }
    };
    if let Err(errors) = spec.check_inputs(&inputs) {
        return input_errors(&errors);
    }
    if let Some(Err(e)) = args.memory_id.as_deref().map(agentic_engine::check_run_id) {
        eprintln!("error: --memory-id: {e}");
        return EXIT_USAGE;
    }
    let runtime = match super::durable::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let opened = match super::open(&runtime, &args.store.store) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let run_id = args.memory_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    // Through a server that holds the store, the same checks read the store through it.
    let (store, remote) = match opened {
        super::Opened::Local(_) if not_here.is_some() => {
            // The server is gone: this process would run the spec, and cannot.
            if let Some(errors) = not_here {
                eprintln!("{errors}");
            }
            return EXIT_USAGE;
        }
        super::Opened::Local(store) => (store, None),
        super::Opened::Server(remote) => {
            let store: agentic_engine::StoreRef = std::sync::Arc::new(super::remote::RemoteStore(remote.clone()));
            (store, Some(remote))
        }
    };
    let existing = match &args.memory_id {
        None => None,
        Some(_) => match runtime.block_on(store.run_dyn(&run_id)) {
            Ok(existing) => existing,
            Err(e) => {
                eprintln!("run: {run_id}");
                return super::store_failed(&args.store.store, &e);
            }
        },
    };
    // A new run gets the defaults of the inputs it lacks, and lacks no required one (declared in `params`, else
    // read by an agent that always runs): it is refused before anything runs or is recorded. A new turn of a
    // completed run continues on its state, which may hold them already: it is given only what is given.
    if existing.is_none() {
        if let Err(errors) = spec.complete_inputs(&mut inputs) {
            return input_errors(&errors);
        }
        let missing = built.missing_inputs(&inputs);
        if !missing.is_empty() {
            return input_errors(&missing);
        }
    }
    eprintln!("run: {run_id}");
    let source = std::fs::canonicalize(&args.spec).unwrap_or_else(|_| args.spec.clone());
    // A completed run id starts a new turn on its state; any other existing run is continued with
    // `agentic resume`, not restarted with new inputs over its half-done state.
    if let Some(existing) = existing.as_ref().filter(|e| e.status != agentic_engine::RunStatus::Completed) {
        // A failed or cancelled run's questions take no answer: `resume` asks them again.
        // An answered question waits only for the resume.
        let pending: Vec<&str> = existing
            .open_pending()
            .iter()
            .filter(|p| !existing.answers.contains_key(&p.id))
            .map(|p| p.id.as_str())
            .collect();
        let how = if !existing.withdrawn_questions().is_empty() {
            format!("it takes no answer; continue it with `agentic resume {run_id}`, which asks its questions again")
        } else if pending.is_empty() {
            format!("continue it with `agentic resume {run_id}`")
        } else {
            format!(
                "it waits for {}: answer with `agentic respond {run_id} ..`, then `agentic resume {run_id}`",
                pending.join(", ")
            )
        };
        eprintln!(
            "error: run `{run_id}` already exists and is {}; {how} (or choose another --memory-id)",
            existing.status
        );
        return EXIT_USAGE;
    }
    if let Some(remote) = remote {
        if args.record.is_some() || args.replay.is_some() || args.replay_run.is_some() {
            eprintln!(
                "error: --record, --replay and --replay-run are not available through a server (`agentic serve` \
                 holds the store {}): stop it, or run with another --store",
                args.store.store.display()
            );
            return EXIT_USAGE;
        }
        if args.stream {
            eprintln!(
                "note: --stream is not available through a server (`agentic serve` holds the store): the output \
                 follows when the run ends"
            );
        }
        let topology = built.root.topology();
        let new_turn = existing.is_some();
        return runtime.block_on(remote_run(&remote, &args, &run_id, inputs, &topology, new_turn));
    }
    let tape = match super::calls::tape_for_run(&runtime, &args, &store) {
        Ok(tape) => tape,
        Err(code) => return code,
    };
    let topology = args.report.as_ref().map(|_| built.root.topology());
    let report_store = store.clone();
    // The run keeps this text whatever becomes of the file (SERVER.md §5).
    let hash = match runtime.block_on(store.put_spec_dyn(&text)) {
        Ok(hash) => hash,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILED;
        }
    };
    let interrupt = super::on_ctrl_c(&runtime, &run_id, &args.store.store);
    let cancel = interrupt.cancel.clone();
    let lease = match super::lease::take(&runtime, &store, &run_id, &cancel) {
        Ok(lease) => lease,
        Err(code) => return code,
    };
    let request = built
        .root
        .invoke()
        .inputs(inputs)
        .memory_id(run_id.clone())
        .durability(args.durability.into())
        .store_ref(store.clone());
    // A spec read from standard input has no file: the run has only its archived text.
    let request =
        if args.spec == std::path::Path::new("-") { request } else { request.source(source.to_string_lossy()) };
    let request = request
        .spec_hash(hash)
        .run_name(built.name.clone())
        .cancel_handle(cancel.clone())
        .drain_handle(interrupt.drain.clone());
    let request = match &tape {
        Some(tape) => request.call_tape(tape.clone()),
        None => request,
    };
    let resume_store = store;
    let progress = super::progress::Progress::start();
    let request = match &progress {
        Some(p) => request.listener(p.clone()),
        None => request,
    };
    let result = if args.stream {
        super::stream::run_streamed(&runtime, request, progress.as_ref(), args.json)
    } else {
        runtime.block_on(async move { request.await })
    };
    let again = || {
        let request = built
            .root
            .resume(run_id.clone())
            .store_ref(resume_store.clone())
            .cancel_handle(cancel.clone())
            .drain_handle(interrupt.drain.clone());
        let request = match &tape {
            Some(tape) => request.call_tape(tape.clone()),
            None => request,
        };
        match &progress {
            Some(p) => request.durability(args.durability.into()).listener(p.clone()),
            None => request.durability(args.durability.into()),
        }
    };
    let result = sleep_through_waits(&runtime, result, &interrupt, again);
    if let Some(p) = &progress {
        p.finish();
    }
    if let Some(lease) = lease {
        lease.release(&runtime);
    }
    let code = report_outcome(&run_id, result, args.json);
    let code = match super::calls::after_run(tape.as_deref(), args.record.as_deref()) {
        Some(failed) => failed.max(code),
        None => code,
    };
    match (&args.report, &topology) {
        (Some(path), Some(topology)) => {
            let report_code = super::report::after_run(&runtime, &report_store, &run_id, topology, path);
            if report_code == EXIT_OK { code } else { report_code.max(code) }
        }
        _ => code,
    }
}

/// `run` through the server holding the store: the spec's text and the inputs are posted, and the outcome is
/// printed once the run stops (the server keeps the text, so the run resumes after a restart).
async fn remote_run(
    remote: &super::remote::Remote,
    args: &RunArgs,
    run_id: &str,
    inputs: Map<String, Value>,
    topology: &agentic_engine::TopologyNode,
    new_turn: bool,
) -> u8 {
    use super::remote::error_of;
    let text = match std::fs::read_to_string(&args.spec) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", args.spec.display());
            return EXIT_USAGE;
        }
    };
    let durability = match args.durability {
        super::args::DurabilityArg::Sync => "sync",
        super::args::DurabilityArg::Async => "async",
        super::args::DurabilityArg::Exit => "exit",
    };
    // The file's name: the server names the run after its stem (unless the spec has a `name:`), as a local run.
    let file_name = args.spec.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut body =
        json!({"spec": text, "file_name": file_name, "inputs": inputs, "run_id": run_id, "durability": durability});
    if new_turn {
        body["new_turn"] = Value::Bool(true);
    }
    match remote.post("/api/v1/runs", &body).await {
        Ok((201, _)) => {}
        Ok((status, body)) => {
            let errors = body.get("errors").and_then(Value::as_array);
            match errors {
                Some(errors) if status == 422 => {
                    for e in errors {
                        eprintln!("error: {}", e.get("text").and_then(Value::as_str).unwrap_or_default());
                    }
                }
                _ => eprintln!("error: {}", error_of(&body, status)),
            }
            return if matches!(status, 409 | 422 | 400) { EXIT_USAGE } else { EXIT_FAILED };
        }
        Err(e) => return e.report(),
    }
    let code = match remote.wait_stopped_or_cancel(run_id).await {
        Ok(record) => print_end(run_id, RunEnd::of_record(&record), args.json),
        Err(e) => return e.report(),
    };
    if let Some(path) = &args.report {
        let store: agentic_engine::StoreRef = std::sync::Arc::new(super::remote::RemoteStore(remote.clone()));
        let report_code = match agentic_report::load_run(&store, run_id).await {
            Ok((run, records)) => super::report::write(path, &agentic_report::render_run(topology, &run, &records)),
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILED
            }
        };
        return if report_code == EXIT_OK { code } else { report_code.max(code) };
    }
    code
}

/// Why the CLI cannot run `spec`, when one of its reachable agents is a human with `mode: pending`: such a
/// human waits for an answer given inside the running process (a Rust program's `Registry::global().answer`),
/// which no command can give, so the run would wait forever. Located like a spec error, saying what to do.
pub(crate) fn pending_human(spec: &agentic_spec::Spec) -> Option<String> {
    let unreachable = spec.unreachable_agents();
    let human = spec.agents().iter().find(|a| {
        // With a deadline it ends by itself (its `on_timeout` applies).
        matches!(a.kind, agentic_spec::AgentKind::Human { pending_mode: true, deadline: None, .. })
            && !unreachable.contains(&a.name.as_str())
    })?;
    Some(format!(
        "{}:{}:{}: agent `{}`: `mode: pending` waits for an answer given inside the running program, which the \
         CLI cannot give (the run would wait forever): use `mode: suspend` (the default: the run suspends, exits \
         2, and `agentic respond` + `agentic resume` answer it)",
        spec.file(),
        human.kind_pos.line,
        human.kind_pos.column,
        human.name
    ))
}

/// Prints the inputs that do not fit the spec, one per line (a missing one with the `--input` that gives
/// it); returns the usage exit code.
fn input_errors(errors: &[agentic_spec::InputError]) -> u8 {
    for e in errors {
        match &e.missing {
            Some(why) => eprintln!("error: missing input `{}` ({why}): give it with --input {}=VALUE", e.key, e.key),
            None => eprintln!("error: {e}"),
        }
    }
    EXIT_USAGE
}

/// `--inputs FILE.json` (an object), then every `--input KEY=VALUE` on top. A `--input` value is JSON when
/// it is valid JSON, else the text; for an input `params` declares a `string`, a JSON value that is not a
/// string is taken as the text (`--input zip=02139`, `--input name=true`).
fn collect_inputs(args: &RunArgs, spec: &Spec) -> Result<Map<String, Value>, String> {
    let mut inputs = Map::new();
    if let Some(path) = &args.inputs {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--inputs {}: {e}", path.display()))?;
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => inputs.extend(map),
            Ok(other) => {
                return Err(format!(
                    "--inputs {}: expected a JSON object of inputs, found {}",
                    path.display(),
                    agentic_engine::json_type_phrase(&other)
                ));
            }
            Err(e) => return Err(format!("--inputs {}: invalid JSON: {e}", path.display())),
        }
    }
    for (key, text) in &args.input {
        let is_string = spec.params().iter().any(|p| p.name == *key && p.ty == agentic_spec::ParamType::String);
        let value = match super::args::parse_value(text) {
            Value::String(s) => Value::String(s),
            _ if is_string => Value::String(text.clone()),
            other => other,
        };
        inputs.insert(key.clone(), value);
    }
    Ok(inputs)
}

/// Writes a line to stdout; a closed pipe (`| head`) is not an error worth a panic.
pub(crate) fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

/// How a run stopped, as the CLI prints it.
pub(crate) enum RunEnd {
    /// Completed with this output.
    Completed(Value),
    /// Suspended, waiting for these responses.
    Suspended(Vec<PendingResponse>),
    /// Failed (or was cancelled: `cancelled` true) with this message.
    Failed { message: String, cancelled: bool },
    /// Stopped because the store could not be reached (exit 75: try again); the message says where.
    StoreUnavailable { message: String },
}

impl RunEnd {
    /// The end of a run awaited in this process.
    pub(crate) fn of_result(result: Result<RunOutcome, AgentError>) -> RunEnd {
        match result {
            Ok(outcome) => match outcome.result {
                RunResult::Completed(output) => RunEnd::Completed(output),
                RunResult::Suspended { pending } => RunEnd::Suspended(pending),
                other => RunEnd::Failed { message: format!("unexpected run result {other:?}"), cancelled: false },
            },
            Err(e) if e.is_store_unavailable() => RunEnd::StoreUnavailable { message: e.to_string() },
            Err(e) => RunEnd::Failed { cancelled: matches!(e, AgentError::Cancelled), message: e.to_string() },
        }
    }

    /// The end of a run as its stored record says (a run a server executed).
    pub(crate) fn of_record(record: &agentic_engine::RunRecord) -> RunEnd {
        use agentic_engine::RunStatus;
        match record.status {
            RunStatus::Completed => RunEnd::Completed(record.detail.clone()),
            RunStatus::Suspended => RunEnd::Suspended(record.pending.clone()),
            RunStatus::Cancelled => RunEnd::Failed { message: AgentError::Cancelled.to_string(), cancelled: true },
            RunStatus::Failed | RunStatus::Running => RunEnd::Failed {
                message: match &record.detail {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                cancelled: false,
            },
        }
    }
}

/// Prints the outcome and returns the exit code.
pub(crate) fn report_outcome(run_id: &str, result: Result<RunOutcome, AgentError>, as_json: bool) -> u8 {
    print_end(run_id, RunEnd::of_result(result), as_json)
}

/// Prints how the run ended (the result on stdout, pending responses and errors on stderr, or one JSON
/// object with `--json`) and returns the exit code.
pub(crate) fn print_end(run_id: &str, end: RunEnd, as_json: bool) -> u8 {
    match end {
        RunEnd::Completed(output) => {
            if as_json {
                print_json(&json!({"run_id": run_id, "status": "completed", "output": output, "pending": []}));
            } else {
                match &output {
                    Value::String(s) => out(s),
                    other => out(&other.to_string()),
                }
            }
            EXIT_OK
        }
        RunEnd::Suspended(pending) => {
            for p in &pending {
                eprintln!("pending: {} (agent `{}`): {}{}", p.id, p.agent, p.prompt, deadline_note(p));
            }
            if as_json {
                let pending: Vec<Value> = pending.iter().map(PendingResponse::to_json).collect();
                print_json(&json!({"run_id": run_id, "status": "suspended", "output": null, "pending": pending}));
            }
            EXIT_SUSPENDED
        }
        RunEnd::Failed { message, cancelled } => {
            let status = if cancelled { "cancelled" } else { "failed" };
            eprintln!("error: {message}");
            if as_json {
                print_json(&json!({
                    "run_id": run_id,
                    "status": status,
                    "output": null,
                    "pending": [],
                    "error": message,
                }));
            }
            EXIT_FAILED
        }
        RunEnd::StoreUnavailable { message } => {
            eprintln!("error: {message}; the run continues from its last checkpoint with `agentic resume {run_id}`");
            if as_json {
                print_json(&json!({
                    "run_id": run_id,
                    "status": "failed",
                    "output": null,
                    "pending": [],
                    "error": message,
                }));
            }
            super::EXIT_UNAVAILABLE
        }
    }
}

/// What a pending line adds for a deadline: ` — deadline 2026-12-05T04:30:00Z (then the step fails)`, or,
/// once it passed, ` — deadline 2026-12-05T04:30:00Z passed: the step fails at the next resume`.
pub(crate) fn deadline_note(p: &PendingResponse) -> String {
    let now = agentic_engine::now_ms();
    match (p.deadline_ms, &p.on_timeout) {
        (None, _) => String::new(),
        (Some(_), _) if p.kind == PendingKind::Wait => String::new(),
        (Some(d), then) if d <= now => format!(
            " — deadline {} passed: {} at the next resume",
            agentic_engine::rfc3339_ms(d),
            then.as_deref().unwrap_or("the step fails")
        ),
        (Some(d), Some(then)) => format!(" — deadline {} (then {then})", agentic_engine::rfc3339_ms(d)),
        (Some(d), None) => format!(" — deadline {}", agentic_engine::rfc3339_ms(d)),
    }
}

/// Under the CLI a `wait` does not end the process (SPEC.md §3): while the run is suspended only on waits,
/// sleeps until the first is due and continues the run (`again` makes its resume request), in this process.
/// A Ctrl-C while sleeping cancels the run (nothing is in flight), one while it runs stops it as
/// [`super::finish_interrupted`] says. Any other outcome is returned as is.
pub(crate) fn sleep_through_waits(
    rt: &tokio::runtime::Runtime,
    mut result: Result<RunOutcome, AgentError>,
    interrupt: &super::Interrupt,
    again: impl Fn() -> InvokeRequest,
) -> Result<RunOutcome, AgentError> {
    let cancel = &interrupt.cancel;
    loop {
        result = super::finish_interrupted(rt, result, interrupt, &again);
        let Ok(RunOutcome { result: RunResult::Suspended { pending }, .. }) = &result else { return result };
        if pending.is_empty() || pending.iter().any(|p| p.kind != PendingKind::Wait) {
            return result;
        }
        let due = pending.iter().filter_map(|p| p.deadline_ms).min().unwrap_or_default();
        eprintln!("waiting until {} ({})", agentic_engine::rfc3339_ms(due), pending[0].id);
        rt.block_on(async {
            loop {
                if interrupt.drain.is_draining() {
                    cancel.cancel();
                }
                if cancel.is_cancelled() {
                    break;
                }
                let left = due.saturating_sub(agentic_engine::now_ms());
                if left == 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(left.min(200))).await;
            }
        });
        let request = again();
        result = rt.block_on(async move { request.await });
    }
}

pub(crate) fn print_json(v: &Value) {
    out(&v.to_string());
}
