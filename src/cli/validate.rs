//! `agentic validate SPEC`: parse, validate and build a spec without running it.

use agentic_spec::Spec;

use super::args::ValidateArgs;
use super::{EXIT_OK, EXIT_USAGE};

/// Prints `ok: <name> (<N> agents)` (exit 0) or every located error (exit 64). Agents not reachable from
/// the root are reported as warnings on stderr, and so are `local` models this binary cannot run (built
/// without the cargo feature `local`): the spec is still valid, it only needs another binary to run.
pub(crate) fn validate(args: &ValidateArgs) -> u8 {
    let built = Spec::from_path(&args.spec).and_then(|spec| {
        let missing: Vec<(String, agentic_agents::ChatModelRef)> = spec
            .models()
            .iter()
            .filter(|d| matches!(d.provider, agentic_spec::ModelProvider::Local { .. }))
            .filter_map(|d| agentic_spec::model_from_def(d).err().map(|e| (d, e)))
            .map(|(d, e)| {
                eprintln!("warning: {}: model `{}`: {e}; the spec is checked without it", spec.file(), d.name);
                let stand_in = agentic_agents::model::ScriptedModel::new(Vec::<&str>::new()).named(d.name.clone());
                (d.name.clone(), agentic_agents::ChatModelRef::new(stand_in))
            })
            .collect();
        spec.build_with_models(missing).map(|_| spec)
    });
    match built {
        Ok(spec) => {
            for name in spec.unreachable_agents() {
                eprintln!("warning: {}: agent `{name}` is not reachable from the root `{}`", spec.file(), spec.root());
            }
            let n = spec.agents().len();
            super::run::out(&format!("ok: {} ({n} agent{})", spec.name(), if n == 1 { "" } else { "s" }));
            EXIT_OK
        }
        Err(errors) => {
            eprintln!("{errors}");
            EXIT_USAGE
        }
    }
}
