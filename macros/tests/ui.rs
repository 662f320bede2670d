//! The attributes' compile errors name the attribute and what is wrong (`tests/ui/*.rs`, with the compiler's
//! output in `*.stderr`; `TRYBUILD=overwrite cargo test -p agentic-macros` rewrites them).

#[test]
fn compile_errors_name_the_attribute() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
