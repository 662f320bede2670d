//! A spec in YAML: parsing, validation and building never panic, whatever the text; a spec that parses builds
//! or fails with located errors.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    agentic_fuzz::spec(text, "fuzz.yaml");
});
