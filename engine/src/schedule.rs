//! Schedules as a store keeps them (SERVER.md §6): a spec started by a cron expression, and what the servers
//! sharing the store did with its ticks. The store only keeps them and changes them atomically
//! ([`crate::CheckpointStore::change_schedule`]); parsing the cron expression and firing the ticks is the
//! server's work (`agentic-server`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a tick does while the schedule's previous run is still active (`running` or `suspended`), as
/// `skip`, `enqueue` or `allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The tick starts nothing (default); [`ScheduleRecord::skipped`] counts it.
    #[default]
    Skip,
    /// The tick is queued in the schedule ([`ScheduleRecord::starts`]) and its run starts when the runs
    /// before it have ended.
    Enqueue,
    /// The tick starts its run at once, next to the previous one.
    Allow,
}

impl Overlap {
    /// The name as stored and as the API writes it (`skip`, `enqueue`, `allow`).
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Enqueue => "enqueue",
            Overlap::Allow => "allow",
        }
    }
}

impl std::str::FromStr for Overlap {
    type Err = String;

    /// Parses `skip`, `enqueue` or `allow`; the error names the value and the three choices.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "skip" => Ok(Overlap::Skip),
            "enqueue" => Ok(Overlap::Enqueue),
            "allow" => Ok(Overlap::Allow),
            other => Err(format!("`{other}` is not one of `skip`, `enqueue`, `allow`")),
        }
    }
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a schedule's definition comes from: the API (`api`) or a specs directory's `schedules.yaml`
/// (`file`, replaced from the file at each start of a server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleSource {
    /// Created with `POST /api/v1/schedules`.
    #[default]
    Api,
    /// Loaded from `schedules.yaml` in the specs directory.
    File,
}

impl ScheduleSource {
    /// The name as stored (`api`, `file`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleSource::Api => "api",
            ScheduleSource::File => "file",
        }
    }
}

/// A tick taken whose run does not exist yet: queued (`owner` `None`: it waits for the runs before it to end,
/// [`Overlap::Enqueue`]) or being started by the process `owner` since `since_ms`. A process that finds an
/// entry owned by another one for longer than a lease starts the run itself (its owner died between taking
/// the tick and writing the run's record); the run's id makes a second start of it fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickStart {
    /// The run the tick starts: `<schedule id>-<tick, UTC, 20261203T140500Z>`.
    pub run_id: String,
    /// The tick, milliseconds since the Unix epoch.
    pub tick_ms: u64,
    /// The process starting the run (a server's owner id); `None` while the tick is queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When the entry was taken, or queued; milliseconds since the Unix epoch.
    pub since_ms: u64,
}

/// A schedule: its definition (`id`, `spec_name`, `cron`, `timezone`, `inputs`, `overlap`, as SERVER.md §6
/// names them) and what the servers did with its ticks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// The schedule's id: the prefix of its runs' ids.
    pub id: String,
    /// The spec it starts, by name in the server's specs directory (file stem).
    pub spec_name: String,
    /// The cron expression: 5 fields (minute resolution) or 6 (seconds first).
    pub cron: String,
    /// The IANA time zone the cron expression is read in (`UTC`, `Europe/Paris`).
    pub timezone: String,
    /// The inputs of every run it starts.
    #[serde(default)]
    pub inputs: Map<String, Value>,
    /// What a tick does while the previous run is still active.
    #[serde(default)]
    pub overlap: Overlap,
    /// Where the definition comes from.
    #[serde(default)]
    pub source: ScheduleSource,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When the definition was last set (created or changed); only ticks after it run. Milliseconds since the
    /// Unix epoch.
    pub defined_at_ms: u64,
    /// The latest tick taken (started, queued or skipped), milliseconds since the Unix epoch; later ticks
    /// only are taken (a tick is taken once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tick_ms: Option<u64>,
    /// The run of the latest tick that was started (the "previous run" of [`Overlap`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    /// Ticks taken whose runs are not created yet, in tick order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starts: Vec<TickStart>,
    /// How many ticks started nothing because the previous run was still active ([`Overlap::Skip`], or a
    /// full queue).
    #[serde(default)]
    pub skipped: u64,
    /// Why the latest run that could not be started could not (its spec gone or invalid, its inputs refused);
    /// cleared by the next run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The tenant the schedule belongs to (SERVER.md §8), and so the runs it starts: the tenant of the key
    /// that created it; `None` for a tenant-less principal's and `schedules.yaml`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl ScheduleRecord {
    /// A new schedule defined at `now_ms`, with no tick taken.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: impl Into<String>,
        spec_name: impl Into<String>,
        cron: impl Into<String>,
        timezone: impl Into<String>,
        inputs: Map<String, Value>,
        overlap: Overlap,
        source: ScheduleSource,
        now_ms: u64,
    ) -> Self {
        ScheduleRecord {
            id: id.into(),
            spec_name: spec_name.into(),
            cron: cron.into(),
            timezone: timezone.into(),
            inputs,
            overlap,
            source,
            created_at_ms: now_ms,
            defined_at_ms: now_ms,
            last_tick_ms: None,
            last_run_id: None,
            starts: Vec::new(),
            skipped: 0,
            last_error: None,
            tenant: None,
        }
    }

    /// Whether `other` has the same definition (spec name, cron, time zone, inputs, overlap).
    pub fn same_definition(&self, other: &ScheduleRecord) -> bool {
        self.spec_name == other.spec_name
            && self.cron == other.cron
            && self.timezone == other.timezone
            && self.inputs == other.inputs
            && self.overlap == other.overlap
    }

    /// The run id of the tick at `tick_ms` (milliseconds since the Unix epoch): `<id>-<tick>`, the tick in
    /// RFC 3339's basic format in UTC to the second (`nightly-20261203T140500Z`).
    pub fn run_id_at(&self, tick_ms: u64) -> String {
        format!("{}-{}", self.id, basic_utc(tick_ms))
    }
}

/// `tick_ms` (milliseconds since the Unix epoch) as RFC 3339's basic format in UTC, to the second:
/// `20261203T140500Z`.
pub fn basic_utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (hour, minute, second) = (rest / 3600, rest % 3600 / 60, rest % 60);
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z")
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// A change of a schedule made atomically by [`crate::CheckpointStore::change_schedule`]: it gets the
/// schedule (`None`: the store holds none with that id), sets `Some` to create or replace it, `None` to
/// delete it; `Err(message)` refuses it (nothing is written).
pub type ScheduleChange = Box<dyn FnOnce(&mut Option<ScheduleRecord>) -> Result<(), String> + Send>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn ticks_are_named_in_the_basic_utc_format() {
        // 2026-12-03T14:05:00Z
        assert_eq!(basic_utc(1_796_306_700_000), "20261203T140500Z");
        assert_eq!(basic_utc(0), "19700101T000000Z");
        // 2024-02-29T23:59:59.999Z (a leap day)
        assert_eq!(basic_utc(1_709_251_199_999), "20240229T235959Z");
        let s = ScheduleRecord::new(
            "nightly",
            "report",
            "0 2 * * *",
            "UTC",
            Map::new(),
            Overlap::Skip,
            ScheduleSource::Api,
            0,
        );
        assert_eq!(s.run_id_at(1_796_306_700_000), "nightly-20261203T140500Z");
    }

    #[test]
    fn overlap_names_round_trip() {
        for o in [Overlap::Skip, Overlap::Enqueue, Overlap::Allow] {
            assert_eq!(o.as_str().parse::<Overlap>().unwrap(), o);
            assert_eq!(serde_json::to_value(o).unwrap(), serde_json::json!(o.as_str()));
        }
        assert_eq!("never".parse::<Overlap>().unwrap_err(), "`never` is not one of `skip`, `enqueue`, `allow`");
    }
}
