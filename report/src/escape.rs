//! Escaping for HTML/SVG text and for JSON embedded in a `<script>` element, and value formatting.

use serde_json::Value;

/// Escapes `&`, `<`, `>`, `"` and `'` (safe in element content and quoted attribute values).
pub(crate) fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Serializes `value` as JSON safe to place inside `<script type="application/json">`: `<`, `>` and `&` only
/// occur inside JSON strings, where they are replaced by `\u003c`, `\u003e` and `\u0026` (so `</script>` and
/// `<!--` cannot appear). U+2028 and U+2029 are escaped too.
pub(crate) fn script_json(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
    let mut out = String::with_capacity(text.len() + 64);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// A value as one line of text: strings as they are, anything else as compact JSON; cut at `max` characters.
pub(crate) fn value_line(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    truncate(&text, max)
}

/// A value as JSON (strings quoted), cut at `max` characters.
pub(crate) fn value_json(value: &Value, max: usize) -> String {
    truncate(&value.to_string(), max)
}

/// Cuts `text` at `max` characters, adding an ellipsis.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A duration in microseconds for humans: `850 µs`, `12.3 ms`, `1.24 s`, `2m 03s`, `3h 12m`.
pub(crate) fn duration_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        let ms = us as f64 / 1_000.0;
        if ms < 10.0 { format!("{ms:.2} ms") } else { format!("{ms:.1} ms") }
    } else if us < 60_000_000 {
        let s = us as f64 / 1_000_000.0;
        if s < 10.0 { format!("{s:.2} s") } else { format!("{s:.1} s") }
    } else {
        let s = us / 1_000_000;
        if s < 3_600 {
            format!("{}m {:02}s", s / 60, s % 60)
        } else {
            format!("{}h {:02}m", s / 3_600, (s % 3_600) / 60)
        }
    }
}

/// A time in milliseconds since the Unix epoch, as RFC 3339 UTC (seconds).
pub(crate) fn timestamp_ms(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn html_escapes_markup_and_quotes() {
        assert_eq!(
            html(r#"<img src=x onerror="a('b')">&"#),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
        );
    }

    #[test]
    fn script_json_cannot_close_the_script() {
        let text = script_json(&json!({"a": "</script><!-- & \u{2028}"}));
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, json!({"a": "</script><!-- & \u{2028}"}));
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration_us(850), "850 µs");
        assert_eq!(duration_us(12_340), "12.3 ms");
        assert_eq!(duration_us(1_240_000), "1.24 s");
        assert_eq!(duration_us(123_000_000), "2m 03s");
        assert_eq!(duration_us(11_520_000_000), "3h 12m");
        assert_eq!(truncate("abcdef", 4), "abc…");
    }
}
