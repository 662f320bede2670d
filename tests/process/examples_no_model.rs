//! An example run without `--scripted` in a binary that has no model (no `local` feature, no
//! `OPENAI_BASE_URL`) says the three ways out in one sentence, not `Unavailable { provider: .. }`.

#![cfg(not(feature = "local"))]
#![allow(clippy::unwrap_used)]

use agentic::prelude::ScriptedModel;

#[allow(dead_code)]
#[path = "../../examples/common/mod.rs"]
mod common;

#[test]
fn without_a_model_the_error_says_the_two_ways_out() {
    if std::env::var("OPENAI_BASE_URL").is_ok_and(|u| !u.trim().is_empty()) {
        return; // a server is the default model then
    }
    let Err(e) = common::model(false, || ScriptedModel::new(Vec::<&str>::new())) else {
        panic!("no default model in this build")
    };
    // The example's name comes from its executable: here the test binary's (`process`), without the hash.
    let expected = "no model to run this example on: run it on canned replies with `cargo run --example process \
                    -- --scripted`, on an OpenAI-compatible server by setting OPENAI_BASE_URL, or install the local \
                    model once with `scripts/setup-local-model.sh` and run `cargo run --features local --example \
                    process`";
    assert_eq!(e.to_string(), expected);
    // A `main` that returns the error prints its Debug form: the same sentence.
    assert_eq!(format!("{e:?}"), expected);
    // With `--scripted` the canned model is used, whatever the build.
    assert!(common::model(true, || ScriptedModel::new(["hi"])).is_ok());
}
