//! Times as SPEC.md §3 writes them: deadlines and waits are kept as milliseconds since the Unix epoch and
//! shown and read as RFC 3339 times (UTC).

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// `ms` (milliseconds since the Unix epoch) as an RFC 3339 time in UTC, to the second
/// (`2026-12-05T04:30:00Z`).
pub fn rfc3339_ms(ms: u64) -> String {
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(i64::try_from(ms).unwrap_or(i64::MAX))
        .unwrap_or_default();
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// An RFC 3339 time (`2026-12-05T04:30:00Z`, an offset, or fractions of a second) as milliseconds since
/// the Unix epoch.
///
/// # Errors
/// What is wrong with `text`, as a phrase.
pub fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let at = chrono::DateTime::parse_from_rfc3339(text.trim())
        .map_err(|e| format!("`{text}` is not an RFC 3339 time ({e}); write e.g. 2026-12-05T04:30:00Z"))?;
    Ok(u64::try_from(at.timestamp_millis()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_reads_back_as_written() {
        assert_eq!(rfc3339_ms(1_796_445_000_000), "2026-12-05T04:30:00Z");
        assert_eq!(parse_rfc3339_ms("2026-12-05T04:30:00Z"), Ok(1_796_445_000_000));
        assert_eq!(parse_rfc3339_ms("2026-12-05T05:30:00+01:00"), Ok(1_796_445_000_000));
        assert!(parse_rfc3339_ms("tomorrow").unwrap_err().starts_with("`tomorrow` is not an RFC 3339 time"));
    }
}
