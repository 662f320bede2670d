//! The public-surface rule (each lib.rs states it in its module doc): private modules, public items
//! re-exported once at the crate root, except the few facets kept as public modules, whose items the root
//! does not repeat. Checked on the sources: a `pub mod` outside the allowed list, a root re-export out of a
//! public module (a second path), or a path through a private module in README.md or docs/*.md fails.

use std::path::Path;

/// Each crate's lib.rs, the path code outside the crate names it by, and the modules it may make public
/// (`__private` for macro expansions, `fuzzing` for the fuzz targets, the facets).
const CRATES: &[(&str, &str, &[&str])] = &[
    ("engine/src/lib.rs", "engine", &["budget", "limits", "__private"]),
    ("planners/src/lib.rs", "planners", &["__private"]),
    ("agents/src/lib.rs", "agents", &["a2a", "decision", "model", "__private"]),
    ("store/src/lib.rs", "store", &["fuzzing"]),
    ("spec/src/lib.rs", "spec", &[]),
    ("report/src/lib.rs", "report", &[]),
    ("eval/src/lib.rs", "eval", &[]),
    ("server/src/lib.rs", "server", &["fuzzing"]),
    ("macros/src/lib.rs", "macros", &[]),
    ("agentic/src/lib.rs", "", &["telemetry", "prelude", "__private"]),
];

/// The name of the module a top-level line declares (`mod x;`, `pub mod x;`, `pub mod x {`), and whether
/// it is public.
fn module_of(line: &str) -> Option<(&str, bool)> {
    let (public, rest) = match line.strip_prefix("pub mod ") {
        Some(rest) => (true, rest),
        None => (false, line.strip_prefix("mod ")?),
    };
    let name = rest.split([';', ' ', '{']).next()?;
    Some((name, public))
}

#[test]
fn every_crate_follows_the_public_surface_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("docs/ entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    let docs: Vec<(String, String)> =
        docs.iter().map(|p| (p.display().to_string(), std::fs::read_to_string(p).expect("a doc file"))).collect();

    let mut broken = Vec::new();
    for (file, name, allowed) in CRATES {
        let source = std::fs::read_to_string(root.join(file)).expect("a lib.rs");
        let modules: Vec<(&str, bool)> = source.lines().filter_map(module_of).collect();
        for (module, public) in &modules {
            if *public && !allowed.contains(module) {
                broken.push(format!("{file}: `pub mod {module}` (make it private and re-export its items)"));
            }
            let reexport = format!("pub use {module}::");
            if *public && source.lines().any(|l| l.starts_with(&reexport)) {
                broken.push(format!("{file}: the root re-exports items of the public module `{module}`"));
            }
            if !public && !name.is_empty() {
                for prefix in [format!("agentic_{name}::{module}::"), format!("agentic::{name}::{module}::")] {
                    for (doc, text) in &docs {
                        if text.contains(&prefix) {
                            broken.push(format!("{doc}: `{prefix}` names the private module `{module}`"));
                        }
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "the public-surface rule is broken:\n{}", broken.join("\n"));
}
