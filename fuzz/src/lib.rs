//! What the fuzz targets share: each takes arbitrary input to one of the project's decoders and fails only on a
//! panic (or a timeout, or running out of memory); an error result is the expected outcome of bad input.

use std::sync::OnceLock;

/// Parses, validates and builds spec `text` as file `file` (its extension chooses YAML or JSON).
pub fn spec(text: &str, file: &str) {
    match agentic_spec::Spec::parse(text, file) {
        Ok(spec) => {
            // Every error names where it is; building never panics.
            let _ = spec.unreachable_agents();
            if let Err(errors) = spec.build() {
                assert!(!errors.to_string().is_empty(), "an empty build error");
            }
        }
        Err(errors) => assert!(!errors.to_string().is_empty(), "an empty parse error"),
    }
}

/// A current-thread runtime for the targets that drive async code.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime"))
}
