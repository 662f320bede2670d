//! The run host: starts, resumes, answers and cancels the runs of one store, and knows which of them this
//! process is executing.
//!
//! A run executes as the engine's run actors (one request per start or resumption, awaited on a task the
//! host tracks). When a run suspends, nothing of it stays in memory: its record says what it waits for, an
//! answer is recorded in the store, and once no response is left unanswered the host resumes it by itself.
//! Record changes that decide whether to resume (an answer, a run ending) are serialised by one lock, so an
//! answer that arrives while its run is still closing is never left without a resumption.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agentic_engine::{
    AgentError, CancelHandle, DrainHandle, Durability, InvokeRequest, RunOutcome, RunRecord, RunStatus, StoreRef,
};
use agentic_spec::{Spec, SpecErrors};
use serde_json::{Map, Value, json};
use tokio_util::task::TaskTracker;

use crate::error::{ApiError, Refused};
use crate::events::{EventHub, HubListener, SseEvent};

/// The spec a new run is made from.
#[derive(Debug, Clone)]
pub(crate) enum SpecSource {
    /// The spec's text (YAML or JSON), as posted, and the name of the file it came from (`hello.yaml`), if
    /// given: its stem names the run when the spec has no `name:`, as a run of the file does (else `spec`).
    Text {
        /// The YAML or JSON text.
        text: String,
        /// The file name, without a directory.
        file_name: Option<String>,
    },
    /// A spec of `--specs DIR`, by file stem.
    Named(String),
}

/// A request for a new run.
#[derive(Debug)]
pub(crate) struct NewRun {
    pub(crate) spec: SpecSource,
    pub(crate) inputs: Map<String, Value>,
    pub(crate) run_id: Option<String>,
    pub(crate) durability: Durability,
    /// A `run_id` of a completed run starts a new turn on its state instead of being refused.
    pub(crate) new_turn: bool,
    /// The W3C `traceparent` of the request that creates the run: the remote parent of its `invoke_workflow`
    /// span (docs/telemetry.md).
    pub(crate) traceparent: Option<String>,
    /// The tenant the run belongs to (the starting key's, SERVER.md §8); `None` for a tenant-less principal.
    pub(crate) tenant: Option<String>,
}

/// The W3C `traceparent` header of a request, if it has one (checked by the engine: an invalid one is ignored).
pub(crate) fn traceparent(headers: &axum::http::HeaderMap) -> Option<String> {
    headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// The specs of `--specs DIR`, by file stem (`order_approval.yaml` → `order_approval`).
#[derive(Debug, Clone, Default)]
pub(crate) struct SpecCatalog {
    dir: Option<PathBuf>,
}

impl SpecCatalog {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        SpecCatalog { dir }
    }

    /// The directory, if the server offers specs by name.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The spec names offered, sorted (`schedules.yaml` is the directory's schedules, not a spec).
    pub(crate) fn names(&self) -> Vec<String> {
        let Some(dir) = &self.dir else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| spec_extension(p) && !is_schedules_file(p))
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The file of spec `name`.
    pub(crate) fn path(&self, name: &str) -> Result<PathBuf, ApiError> {
        let Some(dir) = &self.dir else {
            return Err(ApiError::unprocessable(format!(
                "spec_name `{name}`: this server offers no specs by name (start it with --specs DIR), post the \
                 spec's text as `spec` instead"
            )));
        };
        let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || "-_.".contains(c));
        if plain && !name.starts_with('.') {
            for ext in ["yaml", "yml", "json"] {
                let path = dir.join(format!("{name}.{ext}"));
                if path.is_file() && !is_schedules_file(&path) {
                    return Ok(path);
                }
            }
        }
        Err(ApiError::unprocessable(format!(
            "spec_name `{name}`: no such spec in {}; the specs offered are: {}",
            dir.display(),
            self.names().join(", ")
        )))
    }
}

fn spec_extension(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// The directory's schedules (`crate::schedule::SCHEDULES_FILE`), which is no spec.
fn is_schedules_file(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()) == Some(crate::schedule::SCHEDULES_FILE)
}

/// Inputs refused by a spec, as the API answers them: `422`, `error` naming each input's field
/// (`inputs.name: missing (read by agent `compose`)`, joined by `; `), every error listed in `errors`.
fn input_errors(errors: Vec<agentic_spec::InputError>) -> ApiError {
    let fields: Vec<String> = errors.iter().map(|e| format!("inputs.{}: {}", e.key, e.message)).collect();
    let list: Vec<Value> = errors
        .iter()
        .map(|e| json!({"field": format!("inputs.{}", e.key), "key": e.key, "message": e.message, "text": e.to_string()}))
        .collect();
    let mut error = ApiError::unprocessable(fields.join("; ")).with("errors", Value::Array(list));
    error.kind = Refused::Inputs(errors.iter().map(ToString::to_string).collect());
    error
}

/// The located errors of an invalid spec, as the API answers them (`422`).
fn spec_errors(errors: &SpecErrors) -> ApiError {
    let list: Vec<Value> = errors
        .iter()
        .map(|e| {
            json!({"file": e.file, "line": e.line, "column": e.column, "agent": e.agent, "field": e.field,
                   "message": e.message, "hint": e.hint, "text": e.to_string()})
        })
        .collect();
    let first = errors.iter().next().map(ToString::to_string).unwrap_or_default();
    let more = match errors.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    ApiError::unprocessable(format!("invalid spec: {first}{more}")).with("errors", Value::Array(list))
}

/// Runs hosted by this process.
#[derive(Clone)]
pub(crate) struct RunHost {
    inner: Arc<Inner>,
}

struct Inner {
    store: StoreRef,
    hub: EventHub,
    specs: SpecCatalog,
    /// Runs this process could not continue, with the reason it reported (once, not at every scan).
    unresumable: Mutex<HashMap<String, (u64, String)>>,
    /// Runs executing in this process, with the handle that cancels them.
    executing: Mutex<HashMap<String, CancelHandle>>,
    /// The tenants of the runs this process started and is executing: what a request about a run whose record
    /// is not written yet is checked against.
    tenants: Mutex<HashMap<String, Option<String>>>,
    /// Serialises the record changes that decide a resumption (answers, runs ending).
    deciding: tokio::sync::Mutex<()>,
    accepting: AtomicBool,
    /// Given to every run: at shutdown, runs stop at their step boundaries and stay `running`.
    drain: DrainHandle,
    tasks: TaskTracker,
    /// Woken each time a run's execution here ends (after the host decided whether to resume it).
    stopped: tokio::sync::Notify,
    /// The id of each run whose execution here ended, once its record says how (the scheduler starts a queued
    /// tick when the run before it ends).
    ended: tokio::sync::broadcast::Sender<String>,
    /// On a store only this process writes: the earliest timer (ms since the epoch) of the suspended runs, so
    /// that [`RunHost::fire_timers`] reads the runs only when one may be due (0: not known yet, read them;
    /// `u64::MAX`: none).
    next_timer_ms: std::sync::atomic::AtomicU64,
}

impl RunHost {
    pub(crate) fn new(store: StoreRef, hub: EventHub, specs: SpecCatalog) -> Self {
        RunHost {
            inner: Arc::new(Inner {
                store,
                hub,
                specs,
                unresumable: Mutex::default(),
                next_timer_ms: std::sync::atomic::AtomicU64::new(0),
                executing: Mutex::default(),
                tenants: Mutex::default(),
                deciding: tokio::sync::Mutex::new(()),
                accepting: AtomicBool::new(true),
                drain: DrainHandle::new(),
                tasks: TaskTracker::new(),
                stopped: tokio::sync::Notify::new(),
                ended: tokio::sync::broadcast::channel(256).0,
            }),
        }
    }

    pub(crate) fn store(&self) -> &StoreRef {
        &self.inner.store
    }

    pub(crate) fn hub(&self) -> &EventHub {
        &self.inner.hub
    }

    pub(crate) fn specs(&self) -> &SpecCatalog {
        &self.inner.specs
    }

    fn executing(&self) -> MutexGuard<'_, HashMap<String, CancelHandle>> {
        // Single inserts and removes: a panic elsewhere cannot leave the map half-changed.
        self.inner.executing.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn unresumable(&self) -> MutexGuard<'_, HashMap<String, (u64, String)>> {
        self.inner.unresumable.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether this process is executing `run_id` now.
    pub(crate) fn is_executing(&self, run_id: &str) -> bool {
        self.executing().contains_key(run_id)
    }

    /// The tenant of `run_id` when this process started it and executes it now (`Some(None)`: tenant-less),
    /// for a request about it before its record is written.
    pub(crate) fn executing_tenant(&self, run_id: &str) -> Option<Option<String>> {
        self.inner.tenants.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(run_id).cloned()
    }

    /// How many runs this process is executing.
    pub(crate) fn in_flight(&self) -> usize {
        self.executing().len()
    }

    /// Starts a new run; returns its id. Errors: `422` invalid spec or inputs, `409` run id taken, `503`
    /// shutting down or the store unreachable.
    pub(crate) async fn start(&self, new: NewRun) -> Result<String, ApiError> {
        if !self.inner.accepting.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable("the server is shutting down: it accepts no new runs"));
        }
        let (text, spec, source) = self.read_spec(&new.spec)?;
        let built = spec.build().map_err(|e| spec_errors(&e))?;
        let mut inputs = new.inputs;
        spec.check_inputs(&inputs).map_err(input_errors)?;
        let run_id = match new.run_id {
            Some(id) => {
                agentic_engine::check_run_id(&id).map_err(|e| ApiError::bad_request(format!("run_id: {e}")))?;
                id
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        // Another tenant's run is not this caller's to continue, nor to learn the status of: its id is taken,
        // and that is all that is said (SERVER.md §8).
        let foreign = |tenant: &Option<String>| new.tenant.is_some() && *tenant != new.tenant;
        if self.executing_tenant(&run_id).is_some_and(|t| foreign(&t)) {
            return Err(ApiError::conflict(format!("run_id: run `{run_id}` already exists")));
        }
        match self.inner.store.run_dyn(&run_id).await? {
            Some(existing) if foreign(&existing.tenant) => {
                return Err(ApiError::conflict(format!("run_id: run `{run_id}` already exists")));
            }
            // A new turn on a completed run continues on its state: its inputs are neither required nor
            // defaulted (as `agentic run --memory-id` of a completed run).
            Some(existing) if new.new_turn && existing.status == RunStatus::Completed => {}
            Some(existing) => {
                return Err(ApiError::conflict(format!("run_id: run `{run_id}` already exists ({})", existing.status)));
            }
            // A new run lacks no required input (declared in `params`, else read by an agent that always runs):
            // refused before it is recorded.
            None => {
                spec.complete_inputs(&mut inputs).map_err(input_errors)?;
                let missing = built.missing_inputs(&inputs);
                if !missing.is_empty() {
                    return Err(input_errors(missing));
                }
            }
        }
        // The run keeps this text whatever becomes of the file (SERVER.md §5): any server continues it from it.
        let hash = self.inner.store.put_spec_dyn(&text).await?;
        if self.is_executing(&run_id) {
            return Err(ApiError::conflict(format!("run_id: run `{run_id}` already exists (running)")));
        }
        // On a shared store the run executes where its lease is: here, from now on.
        if self.inner.store.acquire_lease_dyn(&run_id).await?.is_none() {
            return Err(ApiError::conflict(format!(
                "run_id: run `{run_id}` already exists (executing in another process)"
            )));
        }
        let cancel = CancelHandle::new();
        {
            let mut executing = self.executing();
            if executing.contains_key(&run_id) {
                return Err(ApiError::conflict(format!("run_id: run `{run_id}` already exists (running)")));
            }
            executing.insert(run_id.clone(), cancel.clone());
        }
        self.inner
            .tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(run_id.clone(), new.tenant.clone());
        if let Some(cluster) = self.inner.hub.cluster() {
            cluster.began(&run_id);
        }
        let mut request = built
            .root
            .invoke()
            .inputs(inputs)
            .memory_id(run_id.clone())
            .durability(new.durability)
            .store_ref(self.inner.store.clone())
            .spec_hash(hash)
            .run_name(built.name.clone())
            .cancel_handle(cancel)
            .drain_handle(self.inner.drain.clone())
            .listener(HubListener::new(self.inner.hub.clone(), built.name.clone()));
        if let Some(source) = source {
            request = request.source(source);
        }
        if let Some(traceparent) = &new.traceparent {
            request = request.traceparent(traceparent);
        }
        if let Some(tenant) = &new.tenant {
            request = request.tenant(tenant);
        }
        // Answer once the run's record is written (after its inputs are journaled, and flushed with sync
        // durability): a run the client was told about survives a crash from then on.
        let started = self.inner.hub.expect_start(&run_id);
        self.drive(run_id.clone(), built.name, request);
        match started.await {
            Ok(Ok(())) => Ok(run_id),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(ApiError::internal(format!("run `{run_id}` could not start"))),
        }
    }

    /// Checks that a run of the spec `name` of `--specs` with `inputs` would start now, as a schedule's runs
    /// start (`crate::schedule`). Errors name the field: `400` no `--specs`, `404` no such spec, `422` an
    /// invalid spec (every located error) or inputs it refuses.
    pub(crate) fn check_named_run(&self, name: &str, inputs: &Map<String, Value>) -> Result<(), ApiError> {
        if self.inner.specs.dir().is_none() {
            return Err(ApiError::bad_request(format!(
                "spec_name `{name}`: this server offers no specs by name (start it with --specs DIR): a schedule \
                 starts a spec of --specs"
            )));
        }
        let path = self.inner.specs.path(name).map_err(|e| ApiError::not_found(e.message))?;
        let named = |e: ApiError| ApiError { message: format!("spec_name `{name}`: {}", e.message), ..e };
        let (_, spec) = agentic_spec::read_spec_file(&path).map_err(|e| named(spec_errors(&e)))?;
        let built = spec.build().map_err(|e| named(spec_errors(&e)))?;
        spec.check_inputs(inputs).map_err(input_errors)?;
        let mut inputs = inputs.clone();
        spec.complete_inputs(&mut inputs).map_err(input_errors)?;
        let missing = built.missing_inputs(&inputs);
        if missing.is_empty() { Ok(()) } else { Err(input_errors(missing)) }
    }

    /// Whether the host accepts new runs (not shutting down).
    pub(crate) fn accepting(&self) -> bool {
        self.inner.accepting.load(Ordering::SeqCst)
    }

    /// The ids of the runs whose execution here ends from now on (a lagging receiver is told so).
    pub(crate) fn runs_ended(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.inner.ended.subscribe()
    }

    /// The text of `source`, parsed, and the canonical path of its file (a spec of `--specs`). Errors: `422`
    /// an unknown spec name or an invalid spec, with every located error.
    fn read_spec(&self, source: &SpecSource) -> Result<(String, Spec, Option<String>), ApiError> {
        match source {
            SpecSource::Named(name) => {
                let path = self.inner.specs.path(name)?;
                let (text, spec) = agentic_spec::read_spec_file(&path).map_err(|e| spec_errors(&e))?;
                let path = std::fs::canonicalize(&path).unwrap_or(path).to_string_lossy().into_owned();
                Ok((text, spec, Some(path)))
            }
            SpecSource::Text { text, file_name } => {
                let file_name = file_name.as_deref().unwrap_or("spec");
                Ok((text.clone(), Spec::parse(text, file_name).map_err(|e| spec_errors(&e))?, None))
            }
        }
    }

    /// Awaits `request` on a tracked task, then ends the run's execution here.
    fn drive(&self, run_id: String, run_name: String, request: InvokeRequest) {
        let host = self.clone();
        self.inner.tasks.spawn(async move {
            let result = request.await;
            if let Err(e) = &result {
                tracing::debug!(run_id, "run ended with an error: {e}");
            }
            host.finished(&run_id, &run_name, result).await;
        });
    }

    /// A run's execution ended: tell its subscribers how, and resume it at once when every response it
    /// waits for was answered while it was closing.
    async fn finished(&self, run_id: &str, run_name: &str, result: Result<RunOutcome, AgentError>) {
        let drained = result.as_ref().is_ok_and(RunOutcome::is_drained);
        let error = result.err();
        let refused = match &error {
            Some(e) => crate::error::run_failure(format!("run `{run_id}` could not start: {e}"), e),
            None => ApiError::internal(format!("run `{run_id}` could not start: it stopped")),
        };
        self.inner.hub.started(run_id, Err(refused));
        self.inner.hub.forget_agents(run_id);
        let _deciding = self.inner.deciding.lock().await;
        self.executing().remove(run_id);
        self.inner.tenants.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(run_id);
        // Its execution here ended (drained ones too: another server continues them at once).
        if let Err(e) = self.inner.store.release_lease_dyn(run_id).await {
            tracing::warn!(run_id, "cannot release the run's lease (it runs out by itself): {e}");
        }
        let record = match self.inner.store.run_dyn(run_id).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(run_id, "cannot read the run's record after it ended: {e}");
                None
            }
        };
        // The servers streaming it read its end (or suspension) from the store.
        if let Some(cluster) = self.inner.hub.cluster() {
            cluster.ended(run_id);
        }
        // Nobody listening is fine.
        let _ = self.inner.ended.send(run_id.to_string());
        // A suspension with a deadline or a wait: the timer loop looks again by then.
        if let Some(due) = record.iter().flat_map(|r| r.pending.iter().filter_map(|p| p.deadline_ms)).min() {
            self.inner.next_timer_ms.fetch_min(due, Ordering::SeqCst);
        }
        match &record {
            // On a shared store the follower of a streamed run passes on its end, after the steps another
            // server journaled if the run lost its lease here, and reads it again if the store did not
            // answer just now (`crate::cluster`).
            _ if self.inner.store.shared_dyn() => {}
            Some(record) if record.status != RunStatus::Running => {
                if record.status != RunStatus::Suspended
                    && let Some(event) = SseEvent::of_status(record, last_seq(record))
                {
                    self.inner.hub.publish(run_id, event);
                }
            }
            // Drained at shutdown: it continues at the next start.
            Some(_) if drained => {}
            _ => {
                // The run ended before its record said so (it could not start, or the store failed).
                let error = error.map(|e| e.to_string()).unwrap_or_else(|| "the run stopped".to_string());
                self.inner.hub.publish(run_id, SseEvent::run_level("failed", run_name, json!({"error": error})));
            }
        }
        if let Some(record) = record
            && ready_to_resume(&record)
            && let Err(e) = self.resume_locked(&record, None).await
        {
            tracing::error!(run_id, "cannot resume the answered run: {}", e.message);
        }
        self.inner.stopped.notify_waiters();
    }

    /// Waits until `run_id` is not executing in this process (it completed, failed, was cancelled, suspended,
    /// or was drained at shutdown), then returns its record (`None`: the store holds none, the run could not
    /// start). A run whose answers arrived while it was closing is resumed at once and waited for again.
    /// Errors: the store cannot be read.
    pub(crate) async fn wait_stopped(&self, run_id: &str) -> Result<Option<RunRecord>, ApiError> {
        loop {
            // Registered before the check, so that an end between the two is not missed.
            let notified = self.inner.stopped.notified();
            if !self.is_executing(run_id) {
                break;
            }
            notified.await;
        }
        Ok(self.inner.store.run_dyn(run_id).await?)
    }

    /// Resumes `record`'s run (the caller holds the deciding lock and has checked it is not executing).
    /// With `cancel` already cancelled, the run stops before its next step and is recorded `cancelled`.
    ///
    /// On a shared store it first takes the run's lease: when another process holds it, the run executes
    /// there and nothing is done here (`Ok`). The record is read again under the lease, so a run another
    /// process continued meanwhile is seen as it is now.
    async fn resume_locked(&self, record: &RunRecord, cancel: Option<CancelHandle>) -> Result<(), ApiError> {
        self.resume_locked_with(record, cancel, None).await
    }

    /// As [`Host::resume_locked`], the run answering its calls from `tape` when given (a fork's `reuse_calls`).
    async fn resume_locked_with(
        &self,
        record: &RunRecord,
        cancel: Option<CancelHandle>,
        tape: Option<Arc<agentic_engine::CallTape>>,
    ) -> Result<(), ApiError> {
        let run_id = &record.run_id;
        if self.is_executing(run_id) {
            return Ok(());
        }
        let store = &self.inner.store;
        let fresh;
        let record = if store.shared_dyn() {
            if store.acquire_lease_dyn(run_id).await?.is_none() {
                return Ok(());
            }
            fresh = match store.run_dyn(run_id).await {
                Ok(Some(r)) => r,
                Ok(None) => {
                    let _ = store.release_lease_dyn(run_id).await;
                    return Err(ApiError::no_run(run_id));
                }
                Err(e) => {
                    let _ = store.release_lease_dyn(run_id).await;
                    return Err(e.into());
                }
            };
            // Another process completed it meanwhile: nothing to continue.
            if fresh.status == RunStatus::Completed {
                let _ = store.release_lease_dyn(run_id).await;
                return Ok(());
            }
            &fresh
        } else {
            record
        };
        let result = self.resume_leased(record, cancel, tape).await;
        if result.is_err() {
            let _ = store.release_lease_dyn(run_id).await;
        }
        result
    }

    /// Resumes `record`'s run, whose lease this process holds, on the spec text it started with (or, for a run
    /// recorded before the spec archive, its file). A run whose record asks for a cancel is cancelled instead.
    async fn resume_leased(
        &self,
        record: &RunRecord,
        cancel: Option<CancelHandle>,
        tape: Option<Arc<agentic_engine::CallTape>>,
    ) -> Result<(), ApiError> {
        let run_id = &record.run_id;
        let built = match agentic_spec::run_spec(&self.inner.store, record).await.and_then(|s| s.build(run_id)) {
            Ok(built) => built,
            Err(e) => return Err(e.into()),
        };
        let cancel = cancel.unwrap_or_default();
        if record.cancel_requested {
            cancel.cancel();
        }
        {
            let mut executing = self.executing();
            if executing.contains_key(run_id) {
                return Ok(());
            }
            executing.insert(run_id.clone(), cancel.clone());
        }
        if let Some(cluster) = self.inner.hub.cluster() {
            cluster.began(run_id);
        }
        let mut request = built
            .root
            .resume(run_id.clone())
            .store_ref(self.inner.store.clone())
            .run_name(record.name.clone())
            .cancel_handle(cancel)
            .drain_handle(self.inner.drain.clone())
            .listener(HubListener::new(self.inner.hub.clone(), record.name.clone()));
        if let Some(source) = &record.source {
            request = request.source(source.clone());
        }
        if let Some(tape) = tape {
            request = request.call_tape(tape);
        }
        let answers: Map<String, Value> = record.answers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let resumed = SseEvent::run_level("resumed", &record.name, json!({"answers": answers}));
        self.inner.hub.publish_live(run_id, resumed);
        self.drive(run_id.clone(), record.name.clone(), request);
        Ok(())
    }

    /// Records the answer `value` to `response_id` of `run_id` by `by` (the request's principal, recorded with
    /// a tool call's decision or an in-doubt answer); resumes the run when nothing else is pending. Errors:
    /// `404` unknown run or response, `409` already answered, timed out, or the run failed or was cancelled (its
    /// questions take no answer; the message says that resuming it asks them again), `400` an invalid tool
    /// answer, `503` the store unreachable.
    pub(crate) async fn respond(
        &self,
        run_id: &str,
        response_id: &str,
        value: Value,
        by: &str,
    ) -> Result<(), ApiError> {
        let _deciding = self.inner.deciding.lock().await;
        let record = self.inner.store.run_dyn(run_id).await?.ok_or_else(|| ApiError::no_run(run_id))?;
        // A failed or cancelled run keeps the questions it had asked, but they take no answer until it is
        // resumed (a question that timed out says so instead).
        if matches!(record.status, RunStatus::Failed | RunStatus::Cancelled) {
            let refusal = agentic_engine::answerable(&record, Some(response_id)).err();
            return Err(match refusal {
                Some(e) if e.run_ended_unfinished() => ApiError::conflict(format!(
                    "{e} (POST /api/v1/runs/{}/resume, or `agentic resume {run_id}`)",
                    crate::ui::path_segment(run_id)
                )),
                Some(e) => e.into(),
                None => ApiError::conflict(format!("run `{run_id}` is {}: it takes no answer", record.status)),
            });
        }
        let pending = record.pending.iter().any(|p| p.id == response_id);
        if record.answers.contains_key(response_id) || (!pending && answered_before(&record, response_id)) {
            return Err(ApiError::conflict(format!("response `{response_id}` of run `{run_id}` is already answered")));
        }
        if !pending && let Some(refusal) = agentic_engine::timed_out(&record, response_id) {
            return Err(refusal.into());
        }
        // A running run waits for the questions of its `mode: pending` human steps (in its record).
        if !pending || !matches!(record.status, RunStatus::Suspended | RunStatus::Running) {
            let waiting: Vec<&str> = record.pending.iter().map(|p| p.id.as_str()).collect();
            let what = if waiting.is_empty() {
                format!("it waits for no response ({})", record.status)
            } else {
                format!("it waits for: {}", waiting.join(", "))
            };
            return Err(ApiError::not_found(format!("run `{run_id}` has no pending response `{response_id}`; {what}")));
        }
        agentic_engine::respond_as(&self.inner.store, run_id, Some(response_id), value, Some(by)).await?;
        let Some(record) = self.inner.store.run_dyn(run_id).await? else {
            return Err(ApiError::no_run(run_id));
        };
        if ready_to_resume(&record) && !self.is_executing(run_id) {
            self.resume_locked(&record, None).await.map_err(|e| {
                ApiError::new(e.status, format!("the answer is recorded, but the run cannot continue: {}", e.message))
            })?;
        }
        Ok(())
    }

    /// Continues `run_id` from its last checkpoint when it is not executing (`agentic resume` through the
    /// server): a run interrupted by a crash, a suspended run (which then asks again for what is still
    /// unanswered), a failed or cancelled one. A run executing here, or a completed one, is left as it is.
    /// Errors: `404` unknown run, `422` its spec cannot be found or built, `503` the store unreachable.
    pub(crate) async fn resume(&self, run_id: &str) -> Result<(), ApiError> {
        let _deciding = self.inner.deciding.lock().await;
        if self.is_executing(run_id) {
            return Ok(());
        }
        let record = self.inner.store.run_dyn(run_id).await?.ok_or_else(|| ApiError::no_run(run_id))?;
        // As `agentic resume` without a server: anything but a completed run continues from its last
        // checkpoint (a failed or cancelled one too).
        match record.status {
            RunStatus::Completed => Ok(()),
            _ => self.resume_locked(&record, None).await,
        }
    }

    /// Moves `run_id` to a newer spec text (SERVER.md §5) when its structure is unchanged; the caller then
    /// resumes it. Errors: `404` unknown run, `409` it is executing (here or, on a shared store, elsewhere) or
    /// completed, `422` the spec is invalid or changes the run's structure (naming the change).
    pub(crate) async fn upgrade(&self, run_id: &str, source: SpecSource) -> Result<(), ApiError> {
        let _deciding = self.inner.deciding.lock().await;
        let store = &self.inner.store;
        if self.is_executing(run_id) {
            return Err(ApiError::conflict(format!(
                "run `{run_id}` is executing: move it to another spec once it is suspended or stopped"
            )));
        }
        let (text, spec, path) = self.read_spec(&source)?;
        let label = match &source {
            SpecSource::Named(name) => format!("spec_name `{name}`"),
            SpecSource::Text { .. } => "the posted spec".to_string(),
        };
        let built = spec.build().map_err(|e| spec_errors(&e))?;
        if store.shared_dyn() && store.acquire_lease_dyn(run_id).await?.is_none() {
            return Err(ApiError::conflict(format!("run `{run_id}` is executing in another process")));
        }
        let result = async {
            let record = store.run_dyn(run_id).await?.ok_or_else(|| ApiError::no_run(run_id))?;
            if record.status == RunStatus::Completed {
                return Err(ApiError::conflict(format!("run `{run_id}` has completed: nothing to continue")));
            }
            agentic_spec::upgrade_run(store, &record, &text, path, &built, &label).await.map_err(ApiError::from)
        }
        .await;
        let _ = store.release_lease_dyn(run_id).await;
        result.map(drop)
    }

    /// Forks `run_id` after its step `at_seq` into a new run (`new_id`, else a new UUID) and continues the
    /// fork; the original is not touched. Errors: `404` unknown run, `422` a step beyond the journal, `409`
    /// the new id is taken, `400` an empty id, `503` the store unreachable.
    /// With `reuse_calls`, the fork's model calls whose request equals one of the original's are answered
    /// from the original (SPEC.md §5) while this server executes it.
    pub(crate) async fn fork(
        &self,
        run_id: &str,
        at_seq: u64,
        new_id: Option<String>,
        reuse_calls: bool,
    ) -> Result<String, ApiError> {
        if !self.inner.accepting.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable("the server is shutting down: it accepts no new runs"));
        }
        let _deciding = self.inner.deciding.lock().await;
        let tape = if reuse_calls {
            let original = self.inner.store.run_dyn(run_id).await?.ok_or_else(|| ApiError::no_run(run_id))?;
            let calls = agentic_spec::run_calls(&self.inner.store, &original).await?;
            Some(Arc::new(agentic_engine::CallTape::reusing(calls)))
        } else {
            None
        };
        let record = agentic_engine::fork(&self.inner.store, run_id, at_seq, new_id)
            .await
            .map_err(|e| ApiError::of_fork(run_id, e))?;
        self.resume_locked_with(&record, None, tape).await?;
        Ok(record.run_id)
    }

    /// Cancels `run_id`: it stops at its next step boundary, runs its compensations and is recorded
    /// `cancelled`. The cancel is recorded in the store first, so that the process executing the run stops it
    /// (told at once on a shared store), and a process that takes it over cancels it instead of continuing.
    /// Errors: `404` unknown run, `409` already ended, `503` the store unreachable.
    pub(crate) async fn cancel(&self, run_id: &str) -> Result<(), ApiError> {
        let _deciding = self.inner.deciding.lock().await;
        let executing_here = self.executing().get(run_id).cloned();
        let record = self.inner.store.run_dyn(run_id).await?;
        if let Some(status) = record.as_ref().map(|r| r.status).filter(|s| is_ended(*s))
            && executing_here.is_none()
        {
            return Err(ApiError::conflict(format!("run `{run_id}` has already ended ({status})")));
        }
        if record.is_some() && self.inner.store.shared_dyn() {
            self.inner.store.request_cancel_dyn(run_id).await?;
        }
        if let Some(handle) = executing_here {
            handle.cancel();
            return Ok(());
        }
        let record = record.ok_or_else(|| ApiError::no_run(run_id))?;
        // Executing nowhere (suspended, or interrupted): cancelled here, unless another process holds it (it
        // was told).
        let cancel = CancelHandle::new();
        cancel.cancel();
        self.resume_locked(&record, Some(cancel)).await
    }

    /// Cancels `run_id` if it executes here (a cancel recorded by another process).
    pub(crate) fn cancel_here(&self, run_id: &str) {
        if let Some(handle) = self.executing().get(run_id) {
            tracing::info!(run_id, "cancelled from another server");
            handle.cancel();
        }
    }

    /// Cancels the runs executing here whose record asks for it (after messages may have been missed).
    pub(crate) async fn cancel_requested_here(&self) {
        let runs: Vec<String> = self.executing().keys().cloned().collect();
        for run_id in runs {
            if let Ok(Some(record)) = self.inner.store.run_dyn(&run_id).await
                && record.cancel_requested
            {
                self.cancel_here(&run_id);
            }
        }
    }

    /// Resumes the runs that were executing when the last holder of the store stopped (`running`, nothing
    /// pending), the suspended runs whose every pending response was answered, and the runs with a recorded
    /// cancel (they are cancelled); returns how many.
    ///
    /// On a shared store (several servers on one database) this runs at start and then periodically: the
    /// candidates are the runs whose lease expired (their holder died or was paused too long) or was released,
    /// and each is taken only when its lease can be acquired (a take-over: the fencing token increases).
    pub(crate) async fn resume_interrupted(&self) -> Result<usize, agentic_engine::StoreError> {
        if !self.inner.accepting.load(Ordering::SeqCst) {
            return Ok(0);
        }
        let runs = self.inner.store.takeover_candidates_dyn().await?;
        let _deciding = self.inner.deciding.lock().await;
        let mut resumed = 0;
        for record in runs {
            // Running with nothing pending, or with every pending response answered (it was resumed with
            // those answers and its server stopped before its record changed again).
            let interrupted = record.status == RunStatus::Running
                && record.pending.iter().all(|p| record.answers.contains_key(&p.id));
            // A recorded cancel its server could not carry out (it died after answering `202`) is carried out
            // here, suspended runs included.
            let cancelled = record.cancel_requested;
            if !(interrupted || cancelled || ready_to_resume(&record)) || self.is_executing(&record.run_id) {
                continue;
            }
            // A run that could not be continued is tried again only once its record changed.
            let failed_before = self.unresumable().get(&record.run_id).map(|(at, _)| *at);
            if failed_before == Some(record.updated_at_ms) {
                continue;
            }
            let before = self.in_flight();
            match self.resume_locked(&record, None).await {
                Ok(()) if self.in_flight() > before => {
                    self.unresumable().remove(&record.run_id);
                    resumed += 1;
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(
                        run_id = record.run_id,
                        "cannot continue the run (tried again when its record changes): {}",
                        e.message
                    );
                    self.unresumable().insert(record.run_id.clone(), (record.updated_at_ms, e.message));
                }
            }
        }
        Ok(resumed)
    }

    /// Continues the suspended runs whose timers are due (a human step's deadline, a wait's time) and that
    /// wait for nothing else; returns how many. Any server of a shared store may do it: continuing takes the
    /// run's lease, so one of them does (SPEC.md §3: a timer fires once).
    pub(crate) async fn fire_timers(&self) -> Result<usize, agentic_engine::StoreError> {
        if !self.inner.accepting.load(Ordering::SeqCst) {
            return Ok(0);
        }
        let shared = self.inner.store.shared_dyn();
        let next = &self.inner.next_timer_ms;
        if !shared && agentic_engine::now_ms() < next.load(Ordering::SeqCst) {
            return Ok(0);
        }
        // Runs suspending meanwhile lower it again (`finished`), so none is missed.
        next.store(u64::MAX, Ordering::SeqCst);
        let candidates = match self.inner.store.takeover_candidates_dyn().await {
            Ok(c) => c,
            Err(e) => {
                next.store(0, Ordering::SeqCst);
                return Err(e);
            }
        };
        let now = agentic_engine::now_ms();
        let later = candidates
            .iter()
            .filter(|r| r.status == RunStatus::Suspended)
            .flat_map(|r| r.pending.iter().filter_map(|p| p.deadline_ms))
            .filter(|&d| d > now)
            .min()
            .unwrap_or(u64::MAX);
        next.fetch_min(later, Ordering::SeqCst);
        let due: Vec<RunRecord> = candidates.into_iter().filter(timer_due).collect();
        if due.is_empty() {
            return Ok(0);
        }
        let _deciding = self.inner.deciding.lock().await;
        let mut fired = 0;
        for record in due {
            if self.is_executing(&record.run_id) {
                continue;
            }
            let before = self.in_flight();
            match self.resume_locked(&record, None).await {
                Ok(()) if self.in_flight() > before => fired += 1,
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(run_id = record.run_id, "a timer is due but the run cannot continue: {}", e.message)
                }
            }
        }
        Ok(fired)
    }

    /// Renews the leases of the runs this process executes (a shared store); a run whose lease was lost to
    /// another process is cancelled here (its writes are refused already).
    pub(crate) async fn renew_leases(&self) {
        match self.inner.store.renew_leases_dyn().await {
            Ok(lost) => {
                for run_id in lost {
                    tracing::warn!(run_id, "the run's lease was lost to another process: it stops here");
                    if let Some(handle) = self.executing().get(&run_id) {
                        handle.cancel();
                    }
                }
            }
            Err(e) => tracing::warn!("cannot renew the runs' leases: {e}"),
        }
    }

    /// Stops accepting new runs.
    pub(crate) fn stop_accepting(&self) {
        self.inner.accepting.store(false, Ordering::SeqCst);
    }

    /// Stops the runs at their step boundaries (the steps in flight finish and are journaled; the runs stay
    /// `running`) and waits for them, at most `grace`; returns whether they all stopped in time.
    pub(crate) async fn drain(&self, grace: std::time::Duration) -> bool {
        self.inner.drain.drain();
        self.inner.tasks.close();
        tokio::time::timeout(grace, self.inner.tasks.wait()).await.is_ok()
    }

    /// Waits for every run task started so far (tests, shutdown).
    pub(crate) async fn wait_idle(&self) {
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.tasks.reopen();
    }
}

/// Whether a run in `status` has ended (nothing continues it).
fn is_ended(status: RunStatus) -> bool {
    matches!(status, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled)
}

/// A suspended run whose every pending response has an answer or is due (a deadline passed, a wait's time
/// came: SPEC.md §3).
fn ready_to_resume(record: &RunRecord) -> bool {
    let now = agentic_engine::now_ms();
    record.status == RunStatus::Suspended
        && !record.pending.is_empty()
        && record.pending.iter().all(|p| record.answers.contains_key(&p.id) || p.timed_out(now))
}

/// A suspended run that [`ready_to_resume`] because a timer is due (not only answers).
fn timer_due(record: &RunRecord) -> bool {
    let now = agentic_engine::now_ms();
    ready_to_resume(record) && record.pending.iter().any(|p| p.timed_out(now))
}

/// Whether an earlier resumption of the run consumed an answer to `response_id`.
fn answered_before(record: &RunRecord, response_id: &str) -> bool {
    record.milestones.iter().any(|m| m.answers.contains_key(response_id))
}

/// The last step a run's record knows of (its latest milestone's).
fn last_seq(record: &RunRecord) -> u64 {
    record.milestones.last().map_or(0, |m| m.seq)
}
