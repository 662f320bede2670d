//! Every example spec keeps building: each one in `examples/specs/` parses, validates and builds, its models
//! replaced by scripted ones so no model server is needed. (The runs with exact outputs are in cli_run.rs,
//! spec_patterns.rs, llm_specs.rs and showcase.rs.)

#![allow(clippy::unwrap_used)]

use agentic::agents::model::{ChatModelRef, ScriptedModel};
use agentic::spec::Spec;

const SPECS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs");

fn specs() -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(SPECS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "json"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_example_spec_parses_and_builds() {
    let paths = specs();
    assert!(paths.len() >= 13, "the gallery shrank: {paths:?}");
    for path in paths {
        let spec = Spec::from_path(&path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        let scripted: Vec<(String, ChatModelRef)> =
            spec.models().iter().map(|m| (m.name.clone(), ChatModelRef::new(ScriptedModel::new(["ok"])))).collect();
        let built = spec.build_with_models(scripted).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        assert_eq!(built.name, spec.name(), "{}", path.display());
        assert!(!built.root.topology().walk().is_empty());
    }
}
