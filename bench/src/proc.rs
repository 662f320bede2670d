//! Process figures from `/proc` (Linux): resident memory, peak resident memory, CPU time, load average.

use std::time::Duration;

/// A `Vm*:` field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`), or `None` off Linux.
pub fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Current resident set size in KiB (`VmRSS`).
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS")
}

/// Peak resident set size of this process in KiB (`VmHWM`, what `ru_maxrss` reports).
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM")
}

/// CPU time (user + system, all threads) of this process so far, from `/proc/self/stat` (10 ms ticks).
pub fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3; utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux configuration in use.
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` prints them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let rss = rss_kib().expect("VmRSS");
        let peak = peak_rss_kib().expect("VmHWM");
        assert!(rss > 0 && peak >= rss);
        assert!(cpu_time().is_some());
        assert_eq!(loadavg().split(' ').count(), 3);
    }
}
