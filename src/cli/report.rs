//! `agentic report`: a self-contained HTML report of a run (`agentic report RUN_ID -o FILE.html`) or of a
//! spec's topology (`agentic report --spec SPEC -o FILE.html`), and the `--report FILE.html` option of
//! `agentic run` (SPEC.md §2).

use std::path::Path;

use agentic_engine::{RunRecord, StepRecord, StoreRef, TopologyNode};
use agentic_spec::Spec;

use super::args::ReportArgs;
use super::open_store;
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// Writes the report the arguments ask for; returns the exit code.
pub(crate) fn report(args: ReportArgs) -> u8 {
    match (&args.run_id, &args.spec) {
        (None, Some(spec)) => topology_report(spec, &args.output),
        (Some(run_id), None) => run_report(run_id, &args.store.store, &args.output),
        _ => {
            eprintln!("error: give either a RUN_ID or --spec SPEC");
            EXIT_USAGE
        }
    }
}

/// The topology report of a spec file: drawn from the parsed spec ([`Spec::topology`]), so it needs none of
/// the spec's model providers (a `provider: local` spec draws in a binary without the cargo feature `local`).
fn topology_report(spec: &Path, output: &Path) -> u8 {
    let drawn = Spec::from_path(spec).and_then(|s| s.topology().map(|topology| (topology, s.name().to_string())));
    let (topology, name) = match drawn {
        Ok(drawn) => drawn,
        Err(errors) => {
            eprintln!("{errors}");
            return EXIT_USAGE;
        }
    };
    write(output, &agentic_report::render_topology(&topology, &name))
}

fn run_report(run_id: &str, dir: &Path, output: &Path) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILED;
        }
    };
    let store = match open_store(&runtime, dir) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (run, records) = match runtime.block_on(agentic_report::load_run(&store, run_id)) {
        Ok(loaded) => loaded,
        Err(agentic_report::ReportError::NoRun(_)) => {
            eprintln!("{}", super::no_such_run(run_id, dir));
            return EXIT_FAILED;
        }
        Err(agentic_report::ReportError::Store(e)) => return super::store_failed(dir, &e),
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILED;
        }
    };
    let html = match runtime.block_on(agentic_spec::run_topology(&store, &run)) {
        Ok(topology) => agentic_report::render_run(&topology, &run, &records),
        Err(reason) => {
            eprintln!("warning: {reason}; the report has no topology diagram");
            agentic_report::render_run_without_topology(&run, &records, &reason)
        }
    };
    write(output, &html)
}

/// `agentic run --report FILE.html`: the report of the run that just ended (or suspended).
pub(crate) fn after_run(
    runtime: &tokio::runtime::Runtime,
    store: &StoreRef,
    run_id: &str,
    topology: &TopologyNode,
    output: &Path,
) -> u8 {
    let loaded: Result<(RunRecord, Vec<StepRecord>), _> = runtime.block_on(agentic_report::load_run(store, run_id));
    match loaded {
        Ok((run, records)) => write(output, &agentic_report::render_run(topology, &run, &records)),
        Err(e) => {
            eprintln!("error: --report {}: {e}", output.display());
            EXIT_FAILED
        }
    }
}

pub(crate) fn write(output: &Path, html: &str) -> u8 {
    match agentic_report::write_report(output, html) {
        Ok(()) => {
            eprintln!("report: {}", output.display());
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILED
        }
    }
}
