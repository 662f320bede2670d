//! A stored run keeps the spec it started with (SERVER.md §5): its text is in the store's spec archive,
//! named by its hash in the run record, and every resumption — in any process, after the file was edited,
//! moved or deleted — rebuilds the run from that text. Moving a run to a newer text is explicit
//! ([`upgrade_run`]) and allowed only when the structure is unchanged.

use std::path::Path;

use agentic_engine::{Milestone, RunRecord, RunUpdate, StoreError, StoreRef};

use crate::{BuiltSpec, Spec, SpecErrors};

/// Why a stored run's spec cannot be had, or a newer one cannot replace it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunSpecError {
    /// The run records neither a spec text nor a spec file (it was built in Rust).
    #[error("run `{run_id}` was not started from a spec (no spec text or file recorded)")]
    NoSpec {
        /// The run.
        run_id: String,
    },
    /// The run names a spec text the store does not hold.
    #[error("run `{run_id}`: its spec text {hash} is not in the store's spec archive")]
    Missing {
        /// The run.
        run_id: String,
        /// The spec hash the run records.
        hash: String,
    },
    /// The store failed.
    #[error("run `{run_id}`: cannot read its spec")]
    Store {
        /// The run.
        run_id: String,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// The spec (archived text or file) does not parse or build.
    #[error("the spec of run `{run_id}` ({origin}) does not build:\n{errors}")]
    Invalid {
        /// The run.
        run_id: String,
        /// Where the spec came from: `spec <hash> (archived from FILE)` or the file's path.
        origin: String,
        /// Every located error.
        errors: SpecErrors,
    },
    /// A newer spec changes the run's structure ([`agentic_engine::TopologyNode::structure_change`]).
    #[error("run `{run_id}` cannot move to {new}: its structure changed: {change}")]
    StructureChanged {
        /// The run.
        run_id: String,
        /// The newer spec (a file, or `the posted spec`).
        new: String,
        /// What changed, and where.
        change: String,
    },
}

/// The spec a stored run executes, parsed, with where it came from.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The parsed spec.
    pub spec: Spec,
    /// `spec <hash> (archived from FILE)`, or the file's path for a run recorded before the archive.
    pub origin: String,
    /// Whether it came from the store's archive (else from the run's file).
    pub archived: bool,
}

impl RunSpec {
    /// Builds the spec.
    ///
    /// # Errors
    /// [`RunSpecError::Invalid`] with every located error.
    pub fn build(&self, run_id: &str) -> Result<BuiltSpec, RunSpecError> {
        self.spec.build().map_err(|errors| RunSpecError::Invalid {
            run_id: run_id.to_string(),
            origin: self.origin.clone(),
            errors,
        })
    }

    /// The spec's topology, without any model provider ([`Spec::topology`]).
    ///
    /// # Errors
    /// [`RunSpecError::Invalid`] with every located error.
    pub fn topology(&self, run_id: &str) -> Result<agentic_engine::TopologyNode, RunSpecError> {
        self.spec.topology().map_err(|errors| RunSpecError::Invalid {
            run_id: run_id.to_string(),
            origin: self.origin.clone(),
            errors,
        })
    }
}

/// The file name a run's archived text is parsed under: its source file's name (its stem is the spec's
/// default name, `.json` selects strict JSON), else `spec`.
fn file_name_of(run: &RunRecord) -> String {
    run.source
        .as_deref()
        .and_then(|s| Path::new(s).file_name())
        .map_or_else(|| "spec".to_string(), |n| n.to_string_lossy().into_owned())
}

/// The spec `run` executes: the archived text its record names ([`RunRecord::spec_hash`]), else (a run
/// recorded before the archive) its spec file ([`RunRecord::source`]).
///
/// # Errors
/// [`RunSpecError`]: no spec recorded, the text is missing from the store, the store failed, or the spec does
/// not parse.
pub async fn run_spec(store: &StoreRef, run: &RunRecord) -> Result<RunSpec, RunSpecError> {
    let run_id = run.run_id.clone();
    if let Some(hash) = &run.spec_hash {
        let text = store
            .spec_dyn(hash)
            .await
            .map_err(|source| RunSpecError::Store { run_id: run_id.clone(), source })?
            .ok_or_else(|| RunSpecError::Missing { run_id: run_id.clone(), hash: hash.clone() })?;
        let file = file_name_of(run);
        let origin = match &run.source {
            Some(source) => format!("spec {hash} (archived from {source})"),
            None => format!("spec {hash}"),
        };
        let spec = Spec::parse(&text, &file).map_err(|errors| RunSpecError::Invalid {
            run_id: run_id.clone(),
            origin: origin.clone(),
            errors,
        })?;
        return Ok(RunSpec { spec, origin, archived: true });
    }
    let Some(source) = &run.source else { return Err(RunSpecError::NoSpec { run_id }) };
    let spec = Spec::from_path(Path::new(source)).map_err(|errors| RunSpecError::Invalid {
        run_id: run_id.clone(),
        origin: source.clone(),
        errors,
    })?;
    Ok(RunSpec { spec, origin: source.clone(), archived: false })
}

/// Reads and parses a spec file for a new run, keeping its text (what the store's archive gets); `-` reads
/// the spec from standard input.
///
/// # Errors
/// The file cannot be read, or every problem found in it.
pub fn read_spec_file(path: &Path) -> Result<(String, Spec), SpecErrors> {
    if path == Path::new("-") {
        // The spec on standard input, named `stdin` in messages (and by default).
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| {
            let mut sink = crate::error::Sink::new("stdin");
            sink.push(crate::Pos::default(), None, None, format!("cannot read the spec from standard input: {e}"));
            sink.into_errors()
        })?;
        let spec = Spec::parse(&text, "stdin")?;
        return Ok((text, spec));
    }
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        let mut sink = crate::error::Sink::new(file.clone());
        sink.push(crate::Pos::default(), None, None, format!("cannot read the spec: {e}"));
        sink.into_errors()
    })?;
    let spec = Spec::parse(&text, &file)?;
    Ok((text, spec))
}

/// Moves stored run `run` to a newer spec text (`agentic resume ID --spec FILE`, `POST /api/v1/runs/{id}/resume`
/// with a spec) when its structure is unchanged: archives `text`, and records its hash, `source` (the newer
/// file, if any), the newer build's fingerprint and an `upgraded` milestone in the run's record. `new` names
/// the newer spec in messages. The run is not resumed here.
///
/// Without the run's own spec (a run recorded before the archive whose file is gone), the newer spec must have
/// the run's topology fingerprint.
///
/// # Errors
/// [`RunSpecError::StructureChanged`] naming the first change; the store failed.
pub async fn upgrade_run(
    store: &StoreRef,
    run: &RunRecord,
    text: &str,
    source: Option<String>,
    newer: &BuiltSpec,
    new: &str,
) -> Result<RunRecord, RunSpecError> {
    let run_id = run.run_id.clone();
    let fingerprint = check_structure(store, run, newer, new).await?;
    let changed =
        |change: String| RunSpecError::StructureChanged { run_id: run_id.clone(), new: new.to_string(), change };
    let store_err = |source| RunSpecError::Store { run_id: run_id.clone(), source };
    let hash = store.put_spec_dyn(text).await.map_err(store_err)?;
    let change: RunUpdate = Box::new(move |r: &mut RunRecord| {
        r.spec_hash = Some(hash);
        if source.is_some() {
            r.source = source;
        }
        r.fingerprint = fingerprint;
        let seq = r.milestones.last().map_or(0, |m| m.seq);
        r.milestones.push(Milestone {
            at_ms: now_ms(),
            kind: agentic_engine::MilestoneKind::Upgraded,
            seq,
            pending: Vec::new(),
            answers: Default::default(),
            error: None,
            path: None,
            forked_from: None,
        });
        Ok(())
    });
    match store.update_run_dyn(&run.run_id, change).await.map_err(store_err)? {
        Some(Ok(record)) => Ok(record),
        Some(Err(message)) => Err(changed(message)),
        None => Err(RunSpecError::NoSpec { run_id }),
    }
}

/// Whether stored run `run` may move to the newer spec `newer` ([`upgrade_run`]; `agentic fork --spec` asks
/// before it writes the fork): its structure is unchanged. Returns the newer build's topology fingerprint.
///
/// # Errors
/// [`RunSpecError::StructureChanged`] naming the first change (`new` names the newer spec); the store failed.
pub async fn check_structure(
    store: &StoreRef,
    run: &RunRecord,
    newer: &BuiltSpec,
    new: &str,
) -> Result<String, RunSpecError> {
    let run_id = run.run_id.clone();
    let topology = newer.root.topology();
    let fingerprint = topology.fingerprint();
    let changed =
        |change: String| RunSpecError::StructureChanged { run_id: run_id.clone(), new: new.to_string(), change };
    match run_spec(store, run).await.and_then(|old| old.topology(&run.run_id)) {
        Ok(old) => {
            if let Some(change) = old.structure_change(&topology) {
                return Err(changed(change));
            }
        }
        Err(RunSpecError::Store { source, .. }) => return Err(RunSpecError::Store { run_id, source }),
        Err(_) if fingerprint == run.fingerprint => {}
        Err(e) => {
            return Err(changed(format!(
                "its own spec cannot be compared ({e}), and the newer one has another topology fingerprint ({} in \
                 the store, {fingerprint} now)",
                run.fingerprint
            )));
        }
    }
    Ok(fingerprint)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
