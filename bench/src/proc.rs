//! Process figures from `/proc` (Linux): resident memory, peak resident memory, CPU time (of the process and of
//! its threads by name), the machine's steal time, load average.

use std::time::Duration;

/// A `Vm*:` field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`), or `None` off Linux.
pub fn status_kib(field: &str) -> Option<u64> {
    status_field("/proc/self/status", field)
}

/// A `Vm*:` field of process `pid`'s `/proc/PID/status` in KiB, or `None` when it is gone or off Linux.
pub fn pid_status_kib(pid: u32, field: &str) -> Option<u64> {
    status_field(&format!("/proc/{pid}/status"), field)
}

fn status_field(path: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
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
    stat_cpu_time("/proc/self/stat")
}

/// CPU time (user + system, all threads) of process `pid` so far, from `/proc/PID/stat`.
pub fn pid_cpu_time(pid: u32) -> Option<Duration> {
    stat_cpu_time(&format!("/proc/{pid}/stat"))
}

fn stat_cpu_time(path: &str) -> Option<Duration> {
    // USER_HZ is 100 on every Linux configuration in use.
    stat_ticks(path).map(|t| Duration::from_millis(t.cpu * 10))
}

/// CPU time (user + system) of process `pid` and its children so far: its own, its children's that it has
/// waited for (`cutime`, `cstime`), and its live children's (with theirs): the whole of a PostgreSQL server
/// from its postmaster (backends come and go, the postmaster reaps them). `None` when `pid` is gone or off
/// Linux.
pub fn tree_cpu_time(pid: u32) -> Option<Duration> {
    let own = stat_ticks(&format!("/proc/{pid}/stat"))?;
    let mut ticks = own.cpu + own.children;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some(t) = stat_ticks(&format!("/proc/{child}/stat")).filter(|t| t.ppid == pid) {
            ticks += t.cpu + t.children;
        }
    }
    // USER_HZ is 100 on every Linux configuration in use.
    Some(Duration::from_millis(ticks * 10))
}

/// The parent of process `pid`, from `/proc/PID/stat`.
pub fn parent_pid(pid: u32) -> Option<u32> {
    stat_ticks(&format!("/proc/{pid}/stat")).map(|t| t.ppid)
}

/// A process's parent and CPU ticks: its own (user + system) and its waited-for children's.
struct StatTicks {
    ppid: u32,
    cpu: u64,
    children: u64,
}

fn stat_ticks(path: &str) -> Option<StatTicks> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name start at field 3: ppid is 4, utime/stime 14/15, cutime/cstime 16/17.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let field = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(StatTicks {
        ppid: u32::try_from(field(1)?).ok()?,
        cpu: field(11)? + field(12)?,
        children: field(13)? + field(14)?,
    })
}

/// CPU time (user + system) of this process's threads whose name starts with `prefix` (`llm-server`), from
/// `/proc/self/task/*/stat`; zero when there are none or off Linux.
pub fn threads_cpu_time(prefix: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Duration::ZERO };
    let ticks: u64 = tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter_map(|stat| {
            let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
            if !name.starts_with(prefix) {
                return None;
            }
            let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Time the hypervisor ran something else while this machine's processors wanted to run (the `steal` column
/// of `/proc/stat`, all processors), so far; `None` off Linux. On a shared virtual machine it is what makes a
/// CPU-bound measurement slower without anything in the process changing.
pub fn steal_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let steal: u64 = cpu.split_whitespace().nth(7)?.parse().ok()?;
    Some(Duration::from_millis(steal * 10))
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
        // Not `peak >= rss`: the kernel's RSS counters are approximate per CPU, and the two are read apart.
        assert!(rss > 0 && peak > 0);
        assert!(cpu_time().is_some());
        assert!(steal_time().is_some(), "the steal column of /proc/stat");
        // Spins until its own CPU time, read by name, shows 30 ms (on a loaded machine that takes longer than
        // 30 ms of wall time); a reading that never grows fails at the wall-time limit.
        let worker = std::thread::Builder::new()
            .name("proc-test-spin".into())
            .spawn(|| {
                let t0 = std::time::Instant::now();
                let mut x = 0u64;
                loop {
                    for _ in 0..100_000 {
                        x = x.wrapping_add(std::hint::black_box(1));
                    }
                    let spun = threads_cpu_time("proc-test-spin");
                    if spun >= Duration::from_millis(30) || t0.elapsed() > Duration::from_secs(20) {
                        return (x, spun);
                    }
                }
            })
            .expect("thread");
        let (_, spun) = worker.join().expect("join");
        assert!(spun >= Duration::from_millis(30), "a spinning thread shows CPU time by name: {spun:?}");
        assert_eq!(threads_cpu_time("no-such-thread"), Duration::ZERO);
        assert_eq!(loadavg().split(' ').count(), 3);
    }

    #[test]
    fn counts_a_process_tree_with_its_reaped_children() {
        let me = std::process::id();
        assert_eq!(parent_pid(me), Some(std::os::unix::process::parent_id()));
        // A child that counts to 300 000 (a few hundred ms of CPU whatever the load), waited for: its time
        // joins this process's tree (`cutime`).
        let before = tree_cpu_time(me).expect("this process");
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(status.success());
        let after = tree_cpu_time(me).expect("this process");
        assert!(after >= before + Duration::from_millis(50), "{before:?} → {after:?}");
        assert_eq!(tree_cpu_time(u32::MAX), None);
    }
}
