//! `agentic validate SPEC`: parse, validate and build a spec without running it.

use agentic_spec::Spec;

use super::args::ValidateArgs;
use super::{EXIT_OK, EXIT_USAGE};

/// Prints `ok: <name> (<N> agents)` (exit 0) or every located error (exit 64), those of the `evals:` list
/// included. Agents not reachable from
/// the root are reported as warnings on stderr, and so are `local` models this binary cannot run (built
/// without the cargo feature `local`), `registry` agents (only the Rust program that registers them can
/// run the spec) and `mode: pending` human steps without a deadline (`agentic run` refuses them, with the
/// same located message; `agentic serve` runs them): the spec is still valid, it only needs another binary
/// or the server to run.
pub(crate) fn validate(args: &ValidateArgs) -> u8 {
    let built = Spec::from_path(&args.spec).and_then(|spec| {
        let missing: Vec<(String, agentic_agents::model::ChatModelRef)> = spec
            .models()
            .iter()
            .filter(|d| matches!(d.provider, agentic_spec::ModelProvider::Local { .. }))
            .filter_map(|d| agentic_spec::model_from_def(d).err().map(|e| (d, e)))
            .map(|(d, e)| {
                eprintln!("warning: {}: model `{}`: {e}; the spec is checked without it", spec.file(), d.name);
                let stand_in = agentic_agents::model::ScriptedModel::new(Vec::<&str>::new()).named(d.name.clone());
                (d.name.clone(), agentic_agents::model::ChatModelRef::new(stand_in))
            })
            .collect();
        // `registry` agents come from the Rust program that builds the spec: checked here against stand-ins.
        let registry = agentic_engine::AgentRegistry::new();
        for def in spec.agents() {
            if let agentic_spec::AgentKind::Registry { name } = &def.kind
                && !registry.contains(&name.value)
            {
                eprintln!(
                    "warning: {}: agent `{}` is the registered agent `{}`: only the Rust program that registers it \
                     can run the spec; the spec is checked without it",
                    spec.file(),
                    def.name,
                    name.value
                );
                let stand_in = agentic_agents::ScopeAction::with_spec(
                    agentic_engine::AgentSpec::new(name.value.clone(), "registry"),
                    |_| Err("a stand-in for a registered agent".to_string()),
                );
                // The name is not blank (parsing refused a blank one) and not registered yet: this cannot fail.
                let _ = registry.register_as(name.value.clone(), stand_in);
            }
        }
        let context = agentic_spec::BuildContext::new().models(missing).registry(registry);
        spec.build_with(&context).map(|_| spec)
    });
    // The evaluators of `evals:` (SPEC.md §6), checked as `agentic eval` reads them.
    let built = built.and_then(|spec| agentic_eval::Evaluator::of_spec(&spec).map(|_| spec));
    match built {
        Ok(spec) => {
            for name in spec.unreachable_agents() {
                eprintln!("warning: {}: agent `{name}` is not reachable from the root `{}`", spec.file(), spec.root());
            }
            // Valid, and `agentic serve` runs it (its inbox and API answer the step); `agentic run` refuses it.
            if let Some(message) = super::run::pending_human(&spec) {
                eprintln!(
                    "warning: {message}; `agentic run` refuses this spec, `agentic serve` runs it as it is (its \
                     inbox and API take the answer)"
                );
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
