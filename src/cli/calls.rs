//! Recordings on the command line (SPEC.md §5): `agentic calls RUN_ID` prints a stored run's calls as JSON
//! lines; `run --record FILE`, `--replay FILE`, `--replay-run RUN_ID` and `fork --reuse-calls` give the run a
//! [`CallTape`] ([`tape_for_run`], [`reusing`]) and say afterwards what it recorded or answered ([`after_run`]).

use std::path::Path;
use std::sync::Arc;

use agentic_engine::{CallTape, RecordedCall, StoreRef};

use super::args::{CallsArgs, RunArgs};
use super::durable::run_record;
use super::remote::RemoteStore;
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, Opened};

/// `agentic calls RUN_ID`: the run's calls, one JSON line each (through the server holding the store when
/// one does).
pub(crate) fn calls(args: CallsArgs) -> u8 {
    let rt = match super::durable::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store: StoreRef = match super::open_existing(&rt, &args.store.store) {
        Ok(Opened::Local(store)) => store,
        Ok(Opened::Server(remote)) => Arc::new(RemoteStore(remote)),
        Err(code) => return code,
    };
    let calls = match rt.block_on(stored_calls(&store, &args.run_id, &args.store.store)) {
        Ok(calls) => calls,
        Err(code) => return code,
    };
    if calls.is_empty() {
        eprintln!("run {} journaled no model or tool call", args.run_id);
    }
    for call in &calls {
        super::run::out(&call.to_line());
    }
    EXIT_OK
}

/// The calls of stored run `run_id` as a recording holds them; the exit code after printing why not.
pub(crate) async fn stored_calls(store: &StoreRef, run_id: &str, dir: &Path) -> Result<Vec<RecordedCall>, u8> {
    let record = run_record(store, run_id, dir).await?;
    agentic_spec::run_calls(store, &record).await.map_err(|e| super::store_failed(dir, &e))
}

/// The tape `agentic run` gives its run: recording (`--record`), replaying a file (`--replay`) or a stored
/// run (`--replay-run`), or none; the exit code after printing why not (an unreadable recording: 64).
pub(crate) fn tape_for_run(
    rt: &tokio::runtime::Runtime,
    args: &RunArgs,
    store: &StoreRef,
) -> Result<Option<Arc<CallTape>>, u8> {
    let mode = args.replay_mode.into();
    let tape = match (&args.replay, &args.replay_run) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                eprintln!("error: --replay {}: {e}", path.display());
                EXIT_USAGE
            })?;
            let calls = RecordedCall::read_lines(&text).map_err(|e| {
                eprintln!("error: --replay {}: {e}", path.display());
                EXIT_USAGE
            })?;
            Some(CallTape::replaying(calls, mode))
        }
        (None, Some(run_id)) => {
            let calls = rt
                .block_on(stored_calls(store, run_id, &args.store.store))
                .map_err(|code| if code == EXIT_FAILED { EXIT_USAGE } else { code })?;
            Some(CallTape::replaying(calls, mode))
        }
        (None, None) => {
            if args.replay_mode != super::args::ReplayModeArg::Strict {
                eprintln!("error: --replay-mode needs --replay FILE or --replay-run RUN_ID");
                return Err(EXIT_USAGE);
            }
            None
        }
    };
    Ok(match (tape, &args.record) {
        (Some(tape), Some(_)) => Some(Arc::new(tape.and_record())),
        (Some(tape), None) => Some(Arc::new(tape)),
        (None, Some(_)) => Some(Arc::new(CallTape::recording())),
        (None, None) => None,
    })
}

/// The tape of a fork with `--reuse-calls`: the calls of run `run_id`, answering equal model requests.
pub(crate) async fn reusing(store: &StoreRef, run_id: &str, dir: &Path) -> Result<Arc<CallTape>, u8> {
    Ok(Arc::new(CallTape::reusing(stored_calls(store, run_id, dir).await?)))
}

/// After the run: writes the recording of `--record` (its calls so far, whatever the outcome) and says on
/// stderr how many calls were recorded, replayed or made. Returns an exit code when the file cannot be
/// written.
pub(crate) fn after_run(tape: Option<&CallTape>, record: Option<&Path>) -> Option<u8> {
    let tape = tape?;
    let stats = tape.stats();
    if stats.answered + stats.made > 0 {
        eprintln!("replay: {} call(s) answered from the recording, {} made", stats.answered, stats.made);
    }
    let path = record?;
    let calls = tape.recorded();
    let mut text = String::new();
    for call in &calls {
        text.push_str(&call.to_line());
        text.push('\n');
    }
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("error: --record {}: {e}", path.display());
        return Some(EXIT_FAILED);
    }
    eprintln!("recorded {} call(s) to {}", calls.len(), path.display());
    None
}
