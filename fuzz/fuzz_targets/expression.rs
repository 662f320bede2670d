//! Expressions and templates (minijinja with the project's filters) over a state: compiling and evaluating
//! never panic. Input: the source, a NUL byte, then the state as a JSON object (absent or invalid: empty).
#![no_main]

use agentic_agents::{Expression, Template};
use agentic_engine::ScopeView;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (source, state) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(source) = std::str::from_utf8(source) else { return };
    let state = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(state).unwrap_or_default();
    let view = ScopeView::from_map(state);
    if let Ok(expression) = Expression::compile(source) {
        let _ = expression.eval(&view, &[("iteration", serde_json::json!(1))]);
    }
    if let Ok(template) = Template::compile(source) {
        let _ = template.render(&view, &[]);
    }
});
