//! Schedules (SERVER.md §6): their definitions, checked; their cron expressions in their time zones; the API
//! (`/api/v1/schedules`); and the specs directory's `schedules.yaml`, loaded at start. The ticks are fired by
//! [`crate::scheduler`].

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use agentic_engine::{Overlap, ScheduleChange, ScheduleRecord, ScheduleSource};
use axum::extract::{Extension, Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::api::{StrictJson, timestamp};
use crate::auth::Principal;
use crate::error::{ApiError, ServeError};
use crate::host::RunHost;

/// The file of a specs directory that lists schedules (a YAML list of [`ScheduleDef`] objects); it is not a
/// spec.
pub(crate) const SCHEDULES_FILE: &str = "schedules.yaml";

/// The longest schedule id (letters, digits, `-`, `_`, `.`).
const MAX_ID_LEN: usize = 64;

/// A refusal of [`ScheduleChange`]s meaning "no such schedule".
const GONE: &str = "no such schedule";

/// A refusal of [`ScheduleChange`]s meaning "the id is taken".
const TAKEN: &str = "taken";

/// A refusal meaning "nothing to change" (the file's definition is the stored one).
const UNCHANGED: &str = "unchanged";

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A schedule as posted (`POST /api/v1/schedules`) or listed in `schedules.yaml`: SERVER.md §6's fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScheduleDef {
    id: String,
    spec_name: String,
    cron: String,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
    #[serde(default)]
    overlap: Option<String>,
}

/// The cron nicknames (Vixie cron's, without `@reboot`) and the 5 fields each stands for.
const NICKNAMES: [(&str, &str); 7] = [
    ("yearly", "0 0 1 1 *"),
    ("annually", "0 0 1 1 *"),
    ("monthly", "0 0 1 * *"),
    ("weekly", "0 0 * * 0"),
    ("daily", "0 0 * * *"),
    ("midnight", "0 0 * * *"),
    ("hourly", "0 * * * *"),
];

/// The 5 fields of cron nickname `@nickname` (`given` is the whole value, for the error): `400` naming the
/// nicknames there are for any other.
fn nickname_fields(given: &str, nickname: &str) -> Result<&'static str, ApiError> {
    NICKNAMES.iter().find(|(name, _)| name.eq_ignore_ascii_case(nickname)).map(|(_, fields)| *fields).ok_or_else(|| {
        let known = NICKNAMES.iter().map(|(name, _)| format!("@{name}")).collect::<Vec<_>>().join(", ");
        ApiError::bad_request(format!(
            "cron: `{given}` is not one of the nicknames {known}; else give 5 fields (minute hour day-of-month \
             month day-of-week)"
        ))
    })
}

/// A cron expression read in its time zone: when its ticks are.
#[derive(Debug, Clone)]
pub(crate) struct Timing {
    cron: Cron,
    tz: chrono_tz::Tz,
}

impl Timing {
    /// Parses `cron` (5 fields, minute resolution, or 6, seconds first) and `timezone` (an IANA name). Errors:
    /// `400` naming the field, the value and what is expected.
    pub(crate) fn parse(cron: &str, timezone: &str) -> Result<Timing, ApiError> {
        let given = cron;
        let cron = match cron.trim().strip_prefix('@') {
            Some(nickname) => nickname_fields(given, nickname)?,
            None => cron,
        };
        let fields = cron.split_whitespace().count();
        if fields != 5 && fields != 6 {
            return Err(ApiError::bad_request(format!(
                "cron: `{cron}` has {fields} field{}; expected 5 (minute hour day-of-month month day-of-week) or 6 \
                 (second minute hour day-of-month month day-of-week)",
                if fields == 1 { "" } else { "s" }
            )));
        }
        let parser = CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build();
        let cron = parser.parse(cron).map_err(|e| {
            // Which field is at fault: the first that fails with every other field `*`.
            let parts: Vec<&str> = cron.split_whitespace().collect();
            let names: &[&str] = if parts.len() == 6 {
                &["second", "minute", "hour", "day-of-month", "month", "day-of-week"]
            } else {
                &["minute", "hour", "day-of-month", "month", "day-of-week"]
            };
            let culprit = (0..parts.len()).find(|&i| {
                let alone: Vec<&str> = (0..parts.len()).map(|j| if i == j { parts[i] } else { "*" }).collect();
                parser.parse(&alone.join(" ")).is_err()
            });
            match culprit {
                Some(i) => ApiError::bad_request(format!(
                    "cron: `{cron}`: field {} ({}) `{}` is invalid: {e}",
                    i + 1,
                    names[i],
                    parts[i]
                )),
                None => ApiError::bad_request(format!("cron: `{cron}`: {e}")),
            }
        })?;
        let tz = timezone.parse::<chrono_tz::Tz>().map_err(|_| {
            ApiError::bad_request(format!(
                "timezone: `{timezone}` is not an IANA time zone name (such as `UTC`, `Europe/Paris`, \
                 `America/New_York`)"
            ))
        })?;
        Ok(Timing { cron, tz })
    }

    /// The latest tick at or before `ms` (milliseconds since the Unix epoch), if any.
    pub(crate) fn latest_at_or_before(&self, ms: u64) -> Option<u64> {
        let at = self.zoned(ms)?;
        let tick = self.cron.find_previous_occurrence(&at, true).ok()?;
        u64::try_from(tick.timestamp_millis()).ok()
    }

    /// The first tick after `ms`, if any.
    pub(crate) fn next_after(&self, ms: u64) -> Option<u64> {
        let at = self.zoned(ms)?;
        let tick = self.cron.find_next_occurrence(&at, false).ok()?;
        u64::try_from(tick.timestamp_millis()).ok()
    }

    fn zoned(&self, ms: u64) -> Option<DateTime<chrono_tz::Tz>> {
        Some(DateTime::<Utc>::from_timestamp_millis(i64::try_from(ms).ok()?)?.with_timezone(&self.tz))
    }
}

/// Checks an id: 1 to [`MAX_ID_LEN`] letters, digits, `-`, `_` or `.`, not starting with `.` (it is a path
/// segment of the API and the prefix of run ids).
fn check_id(id: &str) -> Result<(), ApiError> {
    let plain = id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if id.is_empty() || id.len() > MAX_ID_LEN || !plain || id.starts_with('.') {
        return Err(ApiError::bad_request(format!(
            "id: `{}` is not a schedule id: 1 to {MAX_ID_LEN} letters, digits, `-`, `_` or `.`, not starting with `.`",
            id.escape_debug()
        )));
    }
    Ok(())
}

/// Checks `def` against this server's specs (the spec exists and builds, it takes the inputs) and returns the
/// schedule it defines at `now_ms`. Errors name the field: `400` a bad `id`, `cron`, `timezone` or
/// `overlap`, or a server without `--specs`; `404` an unknown `spec_name`; `422` an invalid spec or inputs.
pub(crate) fn define(
    host: &RunHost,
    def: ScheduleDef,
    source: ScheduleSource,
    now_ms: u64,
) -> Result<ScheduleRecord, ApiError> {
    check_id(&def.id)?;
    let timezone = def.timezone.unwrap_or_else(|| "UTC".to_string());
    let timing = Timing::parse(&def.cron, &timezone)?;
    if timing.next_after(now_ms).is_none() {
        return Err(ApiError::bad_request(format!("cron: `{}` never matches a date", def.cron)));
    }
    let overlap = match def.overlap.as_deref() {
        None => Overlap::Skip,
        Some(o) => o.parse::<Overlap>().map_err(|e| ApiError::bad_request(format!("overlap: {e}")))?,
    };
    let inputs = def.inputs.unwrap_or_default();
    host.check_named_run(&def.spec_name, &inputs)?;
    Ok(ScheduleRecord::new(def.id, def.spec_name, def.cron, timezone, inputs, overlap, source, now_ms))
}

/// A schedule as the API answers it: its definition, plus (extensions) where it comes from, when it was
/// created, its next tick, its latest tick and run, the ticks queued, the ticks skipped and the latest error.
pub(crate) fn schedule_json(s: &ScheduleRecord, now_ms: u64) -> Value {
    let from = now_ms.max(s.defined_at_ms);
    let next = Timing::parse(&s.cron, &s.timezone).ok().and_then(|t| t.next_after(from)).map(timestamp);
    let queued: Vec<&str> = s.starts.iter().filter(|e| e.owner.is_none()).map(|e| e.run_id.as_str()).collect();
    json!({
        "id": s.id,
        "spec_name": s.spec_name,
        "cron": s.cron,
        "timezone": s.timezone,
        "inputs": s.inputs,
        "overlap": s.overlap.as_str(),
        "source": s.source.as_str(),
        "created_at": timestamp(s.created_at_ms),
        "next_tick": next,
        "last_tick": s.last_tick_ms.map(timestamp),
        "last_run_id": s.last_run_id,
        "queued": queued,
        "skipped": s.skipped,
        "last_error": s.last_error,
    })
}

/// The schedule routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/schedules", post(create).get(list))
        .route("/api/v1/schedules/{id}", get(show).delete(delete))
}

/// `POST /api/v1/schedules`: `201` and the schedule; `409` when the id is taken.
async fn create(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    StrictJson(def): StrictJson<ScheduleDef>,
) -> Result<Response, ApiError> {
    let now = now_ms();
    let mut schedule = define(&app.host, def, ScheduleSource::Api, now)?;
    // Its runs are the creator's tenant's.
    schedule.tenant = principal.tenant.clone();
    let id = schedule.id.clone();
    let change: ScheduleChange = Box::new(move |current: &mut Option<ScheduleRecord>| {
        if current.is_some() {
            return Err(TAKEN.to_string());
        }
        *current = Some(schedule);
        Ok(())
    });
    match app.host.store().change_schedule_dyn(&id, change).await? {
        Ok(Some(written)) => {
            tracing::info!(schedule = id, "schedule created: `{}` in {}", written.cron, written.timezone);
            Ok((StatusCode::CREATED, Json(schedule_json(&written, now))).into_response())
        }
        Ok(None) => Err(ApiError::internal(format!("schedule `{id}` was not written"))),
        Err(_) => Err(ApiError::conflict(format!("id: schedule `{id}` already exists"))),
    }
}

/// `GET /api/v1/schedules`: `{"schedules": [..]}`, by id, those of the principal's tenant.
async fn list(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    let now = now_ms();
    let mut schedules = app.store_for(&principal).schedules_dyn().await?;
    schedules.retain(|s| principal.sees_tenant(s.tenant.as_deref()));
    Ok(Json(json!({"schedules": schedules.iter().map(|s| schedule_json(s, now)).collect::<Vec<_>>()})))
}

/// `GET /api/v1/schedules/{id}`; `404` when unknown or another tenant's.
async fn show(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    match app.store_for(&principal).schedule_dyn(&id).await? {
        Some(s) if principal.sees_tenant(s.tenant.as_deref()) => Ok(Json(schedule_json(&s, now_ms()))),
        _ => Err(no_schedule(&id)),
    }
}

/// `DELETE /api/v1/schedules/{id}`: `200` and the schedule as it was; its queued ticks are dropped, its runs
/// already started go on. `404` when unknown or another tenant's.
async fn delete(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let change: ScheduleChange = Box::new(move |current: &mut Option<ScheduleRecord>| {
        if current.as_ref().is_some_and(|s| !principal.sees_tenant(s.tenant.as_deref())) {
            return Err(GONE.to_string());
        }
        let removed = current.take().ok_or_else(|| GONE.to_string())?;
        let _ = tx.send(removed);
        Ok(())
    });
    match app.host.store().change_schedule_dyn(&id, change).await? {
        Ok(_) => {
            let removed = rx.try_recv().map_err(|_| ApiError::internal(format!("schedule `{id}`: deleted")))?;
            tracing::info!(schedule = id, "schedule deleted");
            Ok(Json(schedule_json(&removed, now_ms())))
        }
        Err(_) => Err(no_schedule(&id)),
    }
}

fn no_schedule(id: &str) -> ApiError {
    ApiError::not_found(format!("no schedule `{id}`"))
}

/// Loads `schedules.yaml` of `specs_dir` (if there is one) into the store, as the server starts:
///
/// - each schedule it lists is checked as `POST /api/v1/schedules` checks one; a bad one stops the start with
///   an error naming the file, the line, the schedule and the field;
/// - a schedule of the file that the store does not hold is created; one it holds (created through the API,
///   or by an earlier file) takes the file's definition and keeps its ticks (the latest tick, the queue), so
///   no tick runs twice; when its definition changed, only ticks after this start count;
/// - a stored schedule that came from the file and that the file no longer lists is deleted (those created
///   through the API are left alone).
///
/// Returns how many schedules the file lists.
pub(crate) async fn load_file(host: &RunHost, specs_dir: &Path) -> Result<usize, ServeError> {
    let file = specs_dir.join(SCHEDULES_FILE);
    let fail = |message: String| ServeError::Schedules { file: file.clone(), message };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(fail(format!("cannot read it: {e}"))),
    };
    let now = now_ms();
    let defs: Vec<serde_saphyr::Spanned<ScheduleDef>> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_saphyr::from_str(&text).map_err(|e| fail(yaml_message(&e)))?
    };
    let mut ids = BTreeSet::new();
    let mut schedules = Vec::with_capacity(defs.len());
    for def in defs {
        let line = def.defined.line();
        let id = def.value.id.clone();
        if !ids.insert(id.clone()) {
            return Err(fail(format!("line {line}: schedule `{id}` is listed twice")));
        }
        let schedule = define(host, def.value, ScheduleSource::File, now)
            .map_err(|e| fail(format!("line {line}: schedule `{id}`: {}", e.message)))?;
        schedules.push(schedule);
    }
    let store = host.store();
    let listed = schedules.len();
    for schedule in schedules {
        let id = schedule.id.clone();
        let before = store.schedule_dyn(&id).await?;
        let change: ScheduleChange = Box::new(move |current: &mut Option<ScheduleRecord>| match current {
            None => {
                *current = Some(schedule);
                Ok(())
            }
            Some(c) if c.same_definition(&schedule) && c.source == ScheduleSource::File => Err(UNCHANGED.into()),
            Some(c) => {
                if !c.same_definition(&schedule) {
                    c.defined_at_ms = schedule.defined_at_ms;
                }
                c.spec_name = schedule.spec_name;
                c.cron = schedule.cron;
                c.timezone = schedule.timezone;
                c.inputs = schedule.inputs;
                c.overlap = schedule.overlap;
                c.source = ScheduleSource::File;
                Ok(())
            }
        });
        if store.change_schedule_dyn(&id, change).await?.is_ok() {
            match before {
                None => tracing::info!(schedule = id, "schedule created from {SCHEDULES_FILE}"),
                Some(b) if b.source == ScheduleSource::Api => tracing::warn!(
                    schedule = id,
                    "{SCHEDULES_FILE} defines schedule `{id}`, which was created through the API: the file's \
                     definition replaces it (its ticks are kept)"
                ),
                Some(_) => tracing::info!(schedule = id, "schedule changed by {SCHEDULES_FILE} (its ticks are kept)"),
            }
        }
    }
    for stale in store.schedules_dyn().await? {
        if stale.source != ScheduleSource::File || ids.contains(&stale.id) {
            continue;
        }
        let change: ScheduleChange = Box::new(|current: &mut Option<ScheduleRecord>| match current {
            Some(c) if c.source == ScheduleSource::File => {
                *current = None;
                Ok(())
            }
            _ => Err(GONE.into()),
        });
        if store.change_schedule_dyn(&stale.id, change).await?.is_ok() {
            tracing::info!(schedule = stale.id, "schedule deleted: {SCHEDULES_FILE} no longer lists it");
        }
    }
    Ok(listed)
}

/// A YAML or shape error of `schedules.yaml`, with its line and column.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let text = match text.rfind(" at line ") {
        Some(i) if text[i..].contains(", column ") => text[..i].trim().to_string(),
        _ => text.trim().to_string(),
    };
    match e.location() {
        Some(at) => format!(
            "line {}, column {}: {text} (expected a list of schedules: `- {{id, spec_name, cron, \
                             timezone, inputs, overlap}}`)",
            at.line(),
            at.column()
        ),
        None => {
            format!("{text} (expected a list of schedules: `- {{id, spec_name, cron, timezone, inputs, overlap}}`)")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Milliseconds of an RFC 3339 time.
    fn ms(rfc3339: &str) -> u64 {
        u64::try_from(DateTime::parse_from_rfc3339(rfc3339).unwrap().timestamp_millis()).unwrap()
    }

    #[test]
    fn five_fields_tick_on_the_minute_six_on_the_second() {
        let every_2s = Timing::parse("*/2 * * * * *", "UTC").unwrap();
        assert_eq!(every_2s.latest_at_or_before(ms("2026-12-03T14:05:01.300Z")), Some(ms("2026-12-03T14:05:00Z")));
        assert_eq!(every_2s.latest_at_or_before(ms("2026-12-03T14:05:02.000Z")), Some(ms("2026-12-03T14:05:02Z")));
        assert_eq!(every_2s.next_after(ms("2026-12-03T14:05:00.000Z")), Some(ms("2026-12-03T14:05:02Z")));
        assert_eq!(every_2s.next_after(ms("2026-12-03T14:05:00.300Z")), Some(ms("2026-12-03T14:05:02Z")));
        let hourly = Timing::parse("5 * * * *", "UTC").unwrap();
        assert_eq!(hourly.latest_at_or_before(ms("2026-12-03T14:04:59Z")), Some(ms("2026-12-03T13:05:00Z")));
        assert_eq!(hourly.next_after(ms("2026-12-03T14:05:00Z")), Some(ms("2026-12-03T15:05:00Z")));
    }

    #[test]
    fn ticks_are_read_in_the_time_zone_across_daylight_saving() {
        // 02:00 every night in Paris: 01:00 UTC in winter, 00:00 UTC in summer.
        let nightly = Timing::parse("0 2 * * *", "Europe/Paris").unwrap();
        assert_eq!(nightly.next_after(ms("2026-12-03T12:00:00Z")), Some(ms("2026-12-04T01:00:00Z")));
        assert_eq!(nightly.next_after(ms("2026-07-03T12:00:00Z")), Some(ms("2026-07-04T00:00:00Z")));
        // 2026-03-29: 02:00 does not exist in Paris (the clocks go from 02:00 to 03:00); the tick is at 03:00.
        assert_eq!(nightly.next_after(ms("2026-03-28T12:00:00Z")), Some(ms("2026-03-29T01:00:00Z")));
    }

    #[test]
    fn a_wall_clock_time_repeated_when_the_clocks_go_back_ticks_once() {
        // 2026-10-25 in Paris: 03:00 CEST becomes 02:00 CET, so 02:30 happens at 00:30 and at 01:30 UTC.
        let fixed = Timing::parse("30 2 * * *", "Europe/Paris").unwrap();
        assert_eq!(fixed.next_after(ms("2026-10-24T12:00:00Z")), Some(ms("2026-10-25T00:30:00Z")));
        assert_eq!(fixed.next_after(ms("2026-10-25T00:30:00Z")), Some(ms("2026-10-26T01:30:00Z")));
        assert_eq!(fixed.latest_at_or_before(ms("2026-10-25T01:45:00Z")), Some(ms("2026-10-25T00:30:00Z")));
    }

    #[test]
    fn nicknames_stand_for_their_five_fields() {
        let daily = Timing::parse("@daily", "Europe/Paris").unwrap();
        assert_eq!(daily.next_after(ms("2026-12-03T12:00:00Z")), Some(ms("2026-12-03T23:00:00Z")));
        let hourly = Timing::parse("@HOURLY", "UTC").unwrap();
        assert_eq!(hourly.next_after(ms("2026-12-03T12:10:00Z")), Some(ms("2026-12-03T13:00:00Z")));
        let weekly = Timing::parse("@weekly", "UTC").unwrap();
        // 2026-12-03 is a Thursday: the next Sunday is the 6th.
        assert_eq!(weekly.next_after(ms("2026-12-03T12:00:00Z")), Some(ms("2026-12-06T00:00:00Z")));
        let yearly = Timing::parse("@yearly", "UTC").unwrap();
        assert_eq!(yearly.next_after(ms("2026-12-03T12:00:00Z")), Some(ms("2027-01-01T00:00:00Z")));
        let monthly = Timing::parse("@monthly", "UTC").unwrap();
        assert_eq!(monthly.next_after(ms("2026-12-03T12:00:00Z")), Some(ms("2027-01-01T00:00:00Z")));
    }

    #[test]
    fn bad_expressions_and_zones_name_the_field() {
        let e = Timing::parse("0 2 * *", "UTC").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with("cron: `0 2 * *` has 4 fields; expected 5"), "{}", e.message);
        assert_eq!(
            Timing::parse("@reboot", "UTC").unwrap_err().message,
            "cron: `@reboot` is not one of the nicknames @yearly, @annually, @monthly, @weekly, @daily, @midnight, \
             @hourly; else give 5 fields (minute hour day-of-month month day-of-week)"
        );
        assert!(Timing::parse("0 0 0 2 * * 2030", "UTC").unwrap_err().message.contains("has 7 fields"));
        let e = Timing::parse("61 * * * *", "UTC").unwrap_err();
        assert!(e.message.starts_with("cron: `61 * * * *`: field 1 (minute) `61` is invalid: "), "{}", e.message);
        let e = Timing::parse("0 0 9 * * MON-XYZ", "UTC").unwrap_err();
        assert!(e.message.starts_with("cron: `0 0 9 * * MON-XYZ`: field 6 (day-of-week) `MON-XYZ`"), "{}", e.message);
        let e = Timing::parse("0 2 * * *", "Mars/Olympus").unwrap_err();
        assert!(e.message.starts_with("timezone: `Mars/Olympus` is not an IANA time zone name"), "{}", e.message);
        assert!(check_id("nightly-report_v2.1").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(check_id(bad).unwrap_err().message.starts_with("id: "), "{bad}");
        }
    }
}
