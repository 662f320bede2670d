//! The one table: scenario | LangGraph | ours | ratio | target.

use std::time::Duration;

/// One row of the table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// What was measured.
    pub scenario: String,
    /// LangGraph's figure (or the reference, e.g. the latency floor), formatted.
    pub langgraph: String,
    /// Our figure, formatted.
    pub ours: String,
    /// How many times better we are (LangGraph time ÷ ours, ours throughput ÷ LangGraph's, …), formatted.
    pub ratio: String,
    /// The target and whether it holds (`✔`/`✘`), when there is one.
    pub target: String,
}

/// Formats a duration with a unit suited to its size (µs, ms or s).
pub fn dur(d: Duration) -> String {
    us(d.as_secs_f64() * 1e6)
}

/// Formats microseconds with a unit suited to the size.
pub fn us(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2} µs")
    } else if x < 1_000.0 {
        format!("{x:.1} µs")
    } else if x < 100_000.0 {
        format!("{:.2} ms", x / 1e3)
    } else if x < 10_000_000.0 {
        format!("{:.0} ms", x / 1e3)
    } else {
        format!("{:.1} s", x / 1e6)
    }
}

/// Formats a byte count in MiB (or KiB below 1 MiB).
pub fn bytes(b: f64) -> String {
    if b < 1024.0 * 1024.0 { format!("{:.0} KiB", b / 1024.0) } else { format!("{:.1} MiB", b / (1024.0 * 1024.0)) }
}

/// Formats a ratio (`123.4x`).
pub fn ratio(x: f64) -> String {
    if !x.is_finite() {
        "-".to_string()
    } else if x >= 100.0 {
        format!("{x:.0}x")
    } else if x >= 10.0 {
        format!("{x:.1}x")
    } else {
        format!("{x:.2}x")
    }
}

/// `"{what} ✔"` or `"{what} ✘"`.
pub fn target(what: &str, holds: bool) -> String {
    format!("{what} {}", if holds { "✔" } else { "✘" })
}

/// Renders `rows` as a markdown table, with `notes` as lines below it.
pub fn markdown(rows: &[Row], notes: &[String]) -> String {
    let mut s = String::from("| scenario | LangGraph | ours | ratio (× better) | target |\n|---|---:|---:|---:|---|\n");
    for r in rows {
        let cell = |c: &str| if c.is_empty() { "-".to_string() } else { c.replace('|', "\\|") };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            cell(&r.scenario),
            cell(&r.langgraph),
            cell(&r.ours),
            cell(&r.ratio),
            cell(&r.target)
        ));
    }
    if !notes.is_empty() {
        s.push('\n');
        for n in notes {
            s.push_str(&format!("- {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(us(5.0), "5.00 µs");
        assert_eq!(us(2500.0), "2.50 ms");
        assert_eq!(ratio(150.2), "150x");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
        let t = markdown(&[Row { scenario: "a".into(), ours: "1".into(), ..Row::default() }], &["n".into()]);
        assert!(t.contains("| a | - | 1 | - | - |") && t.ends_with("- n\n"));
    }
}
