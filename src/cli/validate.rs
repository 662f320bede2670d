//! `agentic validate SPEC`: parse, validate and build a spec without running it.

use agentic_spec::Spec;

use super::args::ValidateArgs;
use super::{EXIT_OK, EXIT_USAGE};

/// Prints `ok: <name> (<N> agents)` (exit 0) or every located error (exit 64). Agents not reachable from
/// the root are reported as warnings on stderr.
pub(crate) fn validate(args: &ValidateArgs) -> u8 {
    let built = Spec::from_path(&args.spec).and_then(|spec| spec.build().map(|_| spec));
    match built {
        Ok(spec) => {
            for name in spec.unreachable_agents() {
                eprintln!("warning: {}: agent `{name}` is not reachable from the root `{}`", spec.file(), spec.root());
            }
            super::run::out(&format!("ok: {} ({} agents)", spec.name(), spec.agents().len()));
            EXIT_OK
        }
        Err(errors) => {
            eprintln!("{errors}");
            EXIT_USAGE
        }
    }
}
