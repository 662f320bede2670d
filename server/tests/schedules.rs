//! Schedules (SERVER.md §6) on one server over a sled store: the API and its errors, `schedules.yaml`, and the
//! ticks — each fired once, `skip` and `enqueue` while the previous run is active, a start left behind by a
//! dead process, and the catch-up after downtime (only the latest missed tick runs).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentic_engine::{CheckpointStore, Overlap, ScheduleChange, ScheduleRecord, ScheduleSource, TickStart};
use agentic_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// One computation: `tick <label>`.
const TICK: &str = r#"
version: 1
name: tick
root: main
params: { label: string }
agents:
  main: { kind: compute, inputs: [label], template: "tick {{ label }}", output_key: out }
"#;

/// A human approval, then a computation.
const APPROVAL: &str = r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, agents: [ask, done], output_key: out }
  ask: { kind: human, prompt: "ok?", response_id: ok, output_key: answer }
  done: { kind: compute, template: "done {{ answer }}", output_key: out }
"#;

struct Harness {
    server: Option<Server>,
    base: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

/// A directory with `specs/` (the two specs above, and `schedules.yaml` when given) and room for `store/`.
fn workspace(schedules_yaml: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(specs.join("tick.yaml"), TICK).unwrap();
    std::fs::write(specs.join("approval.yaml"), APPROVAL).unwrap();
    if let Some(text) = schedules_yaml {
        std::fs::write(specs.join("schedules.yaml"), text).unwrap();
    }
    dir
}

fn config(dir: &Path) -> ServerConfig {
    let store = agentic_store::SledStore::open(dir.join("store")).unwrap().store_ref();
    ServerConfig::new(store).listen("127.0.0.1:0".parse().unwrap()).specs_dir(dir.join("specs"))
}

impl Harness {
    async fn start(dir: tempfile::TempDir) -> Harness {
        let server = Server::start(config(dir.path())).await.unwrap();
        let base = server.url();
        Harness { server: Some(server), base, http: reqwest::Client::new(), dir }
    }

    async fn stop(mut self) -> tempfile::TempDir {
        self.server.take().unwrap().shutdown().await.unwrap();
        self.dir
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body)).await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.http.get(format!("{}{path}", self.base))).await
    }

    async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.http.delete(format!("{}{path}", self.base))).await
    }

    /// Every run whose id starts with `<schedule>-`, by id: `(id, status)`.
    async fn runs_of(&self, schedule: &str) -> Vec<(String, String)> {
        let (_, list) = self.get("/api/v1/runs?limit=1000").await;
        let mut runs: Vec<(String, String)> = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["run_id"].as_str().unwrap().starts_with(&format!("{schedule}-")))
            .map(|r| (r["run_id"].as_str().unwrap().to_string(), r["status"].as_str().unwrap().to_string()))
            .collect();
        runs.sort();
        runs
    }

    /// Polls until `check` holds for the runs of `schedule` (10 s at most).
    async fn wait_runs(&self, schedule: &str, what: &str, check: impl Fn(&[(String, String)]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let runs = self.runs_of(schedule).await;
            if check(&runs) {
                return;
            }
            assert!(Instant::now() < deadline, "{schedule}: {what}; runs: {runs:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn now_ms() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// The tick of a run id `<schedule>-20261203T140500Z`, as seconds since the epoch.
fn tick_secs(run_id: &str) -> i64 {
    let stamp = &run_id[run_id.len() - 16..];
    chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ").unwrap().and_utc().timestamp()
}

/// Sleeps until 150 ms past the next whole second (ticks of `* * * * * *` are on whole seconds).
async fn just_after_a_second() {
    let into = now_ms() % 1000;
    tokio::time::sleep(Duration::from_millis(1150 - into)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_created_listed_shown_and_deleted() {
    let h = Harness::start(workspace(None)).await;
    let nightly = json!({"id": "nightly", "spec_name": "tick", "cron": "0 2 * * *", "timezone": "Europe/Paris",
                         "inputs": {"label": "night"}, "overlap": "enqueue"});
    let (code, created) = h.post("/api/v1/schedules", nightly.clone()).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    for key in ["id", "spec_name", "cron", "timezone", "inputs", "overlap"] {
        assert_eq!(created[key], nightly[key], "{key}");
    }
    assert_eq!(created["source"], "api");
    assert_eq!((created["last_tick"].clone(), created["last_run_id"].clone()), (Value::Null, Value::Null));
    assert_eq!((created["queued"].clone(), created["skipped"].clone()), (json!([]), json!(0)));
    // 02:00 in Paris is 01:00 or 00:00 UTC.
    let next = created["next_tick"].as_str().unwrap();
    assert!(next.ends_with("T01:00:00.000Z") || next.ends_with("T00:00:00.000Z"), "{next}");

    // Defaults: UTC, no inputs (the spec's params then must have defaults: `tick` has none, so give one), skip.
    let (code, hourly) = h
        .post(
            "/api/v1/schedules",
            json!({"id": "hourly", "spec_name": "tick", "cron": "0 * * * *",
                                           "inputs": {"label": "h"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{hourly}");
    assert_eq!((hourly["timezone"].clone(), hourly["overlap"].clone()), (json!("UTC"), json!("skip")));

    let (code, list) = h.get("/api/v1/schedules").await;
    assert_eq!(code, StatusCode::OK);
    let ids: Vec<&str> = list["schedules"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["hourly", "nightly"]);
    let (code, shown) = h.get("/api/v1/schedules/nightly").await;
    assert_eq!((code, shown), (StatusCode::OK, created.clone()));

    let (code, body) = h.post("/api/v1/schedules", nightly.clone()).await;
    assert_eq!((code, body), (StatusCode::CONFLICT, json!({"error": "id: schedule `nightly` already exists"})));

    let (code, deleted) = h.delete("/api/v1/schedules/nightly").await;
    assert_eq!((code, deleted["id"].clone()), (StatusCode::OK, json!("nightly")));
    let (code, body) = h.get("/api/v1/schedules/nightly").await;
    assert_eq!((code, body), (StatusCode::NOT_FOUND, json!({"error": "no schedule `nightly`"})));
    let (code, body) = h.delete("/api/v1/schedules/nightly").await;
    assert_eq!((code, body), (StatusCode::NOT_FOUND, json!({"error": "no schedule `nightly`"})));
    // `schedules.yaml` is not a spec.
    let (_, specs) = h.get("/api/v1/specs").await;
    assert_eq!(specs, json!({"specs": ["approval", "tick"]}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedules_are_refused_naming_the_field() {
    let h = Harness::start(workspace(None)).await;
    let base = json!({"id": "s", "spec_name": "tick", "cron": "0 2 * * *", "inputs": {"label": "x"}});
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        body
    };
    let cases = [
        (
            with("cron", json!("0 2 * *")),
            400,
            "cron: `0 2 * *` has 4 fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (second minute hour day-of-month month day-of-week)",
        ),
        (with("cron", json!("@reboot")), 400, "cron: `@reboot` is not one of the nicknames @yearly, @annually, "),
        (with("cron", json!("daily")), 400, "cron: `daily` has 1 field; expected 5"),
        (with("cron", json!("61 2 * * *")), 400, "cron: `61 2 * * *`: "),
        (with("cron", json!("0 0 30 2 *")), 400, "cron: `0 0 30 2 *` never matches a date"),
        (
            with("timezone", json!("Mars/Olympus")),
            400,
            "timezone: `Mars/Olympus` is not an IANA time zone name (such as `UTC`, `Europe/Paris`, `America/New_York`)",
        ),
        (with("overlap", json!("queue")), 400, "overlap: `queue` is not one of `skip`, `enqueue`, `allow`"),
        (with("id", json!("a/b")), 400, "id: `a/b` is not a schedule id"),
        (with("spec_name", json!("ghost")), 404, "spec_name `ghost`: no such spec in "),
        (with("inputs", json!({"label": 7})), 422, "inputs.label: expected a string, got 7"),
        (with("inputs", json!({})), 422, "inputs.label: missing (a string, declared in `params` without a default)"),
        (with("cron", json!(5)), 400, "cron: invalid type: integer `5`"),
        (json!({"id": "s", "spec_name": "tick"}), 400, "missing field `cron`"),
        (with("every", json!("day")), 400, "unknown field `every`"),
    ];
    for (body, status, message) in cases {
        let (code, answer) = h.post("/api/v1/schedules", body.clone()).await;
        assert_eq!(code.as_u16(), status, "{body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.starts_with(message), "{body}:\n  got      {error}\n  expected {message}..");
    }
    let (_, list) = h.get("/api/v1/schedules").await;
    assert_eq!(list, json!({"schedules": []}), "nothing was stored");
    h.stop().await;

    // Without --specs there is nothing to schedule.
    let dir = tempfile::tempdir().unwrap();
    let store = agentic_store::SledStore::open(dir.path().join("store")).unwrap().store_ref();
    let server = Server::start(ServerConfig::new(store).listen("127.0.0.1:0".parse().unwrap())).await.unwrap();
    let response = reqwest::Client::new().post(format!("{}/api/v1/schedules", server.url())).json(&base).send();
    let response = response.await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().starts_with("spec_name `tick`: this server offers no specs by name"));
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_yaml_is_loaded_at_start_and_wins_over_a_stored_schedule() {
    let file = r#"
- { id: nightly, spec_name: tick, cron: "0 2 * * *", timezone: Europe/Paris, inputs: { label: night } }
- id: weekly
  spec_name: approval
  cron: "0 9 * * MON"
  overlap: enqueue
"#;
    let dir = workspace(Some(file));
    // Before the start: `nightly` exists, created through the API with another definition, with a tick taken.
    {
        let store = agentic_store::SledStore::open(dir.path().join("store")).unwrap();
        let mut old = ScheduleRecord::new(
            "nightly",
            "tick",
            "0 3 * * *",
            "UTC",
            Default::default(),
            Overlap::Allow,
            ScheduleSource::Api,
            1_000,
        );
        old.last_tick_ms = Some(5_000);
        let api_only = ScheduleRecord::new(
            "mine",
            "tick",
            "0 4 * * *",
            "UTC",
            Default::default(),
            Overlap::Skip,
            ScheduleSource::Api,
            1_000,
        );
        for s in [old, api_only] {
            let id = s.id.clone();
            let put: ScheduleChange = Box::new(move |c: &mut Option<ScheduleRecord>| {
                *c = Some(s);
                Ok(())
            });
            store.change_schedule(&id, put).await.unwrap().unwrap();
        }
    }
    let h = Harness::start(dir).await;
    let (_, nightly) = h.get("/api/v1/schedules/nightly").await;
    assert_eq!((nightly["cron"].clone(), nightly["timezone"].clone()), (json!("0 2 * * *"), json!("Europe/Paris")));
    assert_eq!((nightly["source"].clone(), nightly["overlap"].clone()), (json!("file"), json!("skip")));
    assert_eq!(nightly["last_tick"], "1970-01-01T00:00:05.000Z", "its ticks are kept");
    let (_, weekly) = h.get("/api/v1/schedules/weekly").await;
    assert_eq!((weekly["source"].clone(), weekly["overlap"].clone()), (json!("file"), json!("enqueue")));
    let (_, mine) = h.get("/api/v1/schedules/mine").await;
    assert_eq!(mine["source"], "api", "a schedule the file does not name is left alone");
    let dir = h.stop().await;

    // `weekly` taken out of the file: deleted at the next start; `mine` stays.
    std::fs::write(
        dir.path().join("specs/schedules.yaml"),
        "- { id: nightly, spec_name: tick, cron: \"0 2 * * *\", \
                                                             timezone: Europe/Paris, inputs: { label: night } }\n",
    )
    .unwrap();
    let h = Harness::start(dir).await;
    let (_, list) = h.get("/api/v1/schedules").await;
    let ids: Vec<&str> = list["schedules"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mine", "nightly"]);
    let dir = h.stop().await;

    // A bad file stops the start, naming the file, the line, the schedule and the field.
    let specs = dir.path().join("specs");
    std::fs::write(
        specs.join("schedules.yaml"),
        "- { id: a, spec_name: tick, cron: \"* * * * *\", inputs: { label: x } }\n\
                                                  - { id: b, spec_name: tick, cron: \"* * * * *\", timezone: Moon }\n",
    )
    .unwrap();
    let Err(e) = Server::start(config(dir.path())).await else { panic!("a bad schedules.yaml must stop the start") };
    let message = e.to_string();
    assert!(
        message.starts_with(&format!(
            "{}: line 2: schedule `b`: timezone: `Moon`",
            specs.join("schedules.yaml").display()
        )),
        "{message}"
    );
    std::fs::write(specs.join("schedules.yaml"), "- { id: a, spec_name: tick, crontab: \"* * * * *\" }\n").unwrap();
    let Err(e) = Server::start(config(dir.path())).await else { panic!("a bad schedules.yaml must stop the start") };
    assert!(e.to_string().contains("line 1, column"), "{e}");
    assert!(e.to_string().contains("unknown field `crontab`"), "{e}");
}

/// The ticks on one server: every second, each tick once (`skip` with quick runs); `skip` and `enqueue` while a
/// run waits for a person; a start left behind by a dead process; and after a stop, only the latest missed tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_run_once_each_overlap_holds_and_downtime_catches_up_with_the_latest_tick_only() {
    let dir = workspace(None);
    // Left by an earlier process: `old` (every minute, allowed to overlap) last took a tick 50 minutes ago,
    // and took one 45 minutes ago whose run it never created (it died).
    let now = now_ms();
    let minute = |ago: u64| (now / 60_000 - ago) * 60_000;
    {
        let store = agentic_store::SledStore::open(dir.path().join("store")).unwrap();
        let mut old = ScheduleRecord::new(
            "old",
            "tick",
            "* * * * *",
            "UTC",
            json!({"label": "old"}).as_object().cloned().unwrap(),
            Overlap::Allow,
            ScheduleSource::Api,
            minute(60),
        );
        old.last_tick_ms = Some(minute(45));
        old.last_run_id = Some(old.run_id_at(minute(45)));
        old.starts.push(TickStart {
            run_id: old.run_id_at(minute(45)),
            tick_ms: minute(45),
            owner: Some("a-dead-server".into()),
            since_ms: minute(45),
        });
        let put: ScheduleChange = Box::new(move |c: &mut Option<ScheduleRecord>| {
            *c = Some(old);
            Ok(())
        });
        store.change_schedule("old", put).await.unwrap().unwrap();
    }
    let h = Harness::start(dir).await;

    // The start left behind runs, then the latest missed minute; none of the 44 minutes between.
    h.wait_runs("old", "the left-behind start and the latest minute", |runs| runs.len() >= 2).await;
    let started = Instant::now();
    let old_runs = h.runs_of("old").await;
    let ticks: Vec<i64> = old_runs.iter().map(|(id, _)| tick_secs(id)).collect();
    let latest_minute = i64::try_from(now_ms() / 60_000 * 60).unwrap();
    assert_eq!(ticks[0], i64::try_from(minute(45) / 1000).unwrap(), "{old_runs:?}");
    assert!(ticks[1] == latest_minute || ticks[1] == latest_minute - 60, "{old_runs:?}");
    let (_, old) = h.get("/api/v1/schedules/old").await;
    assert_eq!(old["queued"], json!([]), "{old}");

    // Every second: `quick` (skip, runs that end at once), `waits` (skip, a run that waits for a person) and
    // `queues` (enqueue, the same).
    just_after_a_second().await;
    for (id, spec, overlap, inputs) in [
        ("quick", "tick", "skip", json!({"label": "q"})),
        ("waits", "approval", "skip", json!({})),
        ("queues", "approval", "enqueue", json!({})),
    ] {
        let body = json!({"id": id, "spec_name": spec, "cron": "* * * * * *", "overlap": overlap, "inputs": inputs});
        let (code, answer) = h.post("/api/v1/schedules", body).await;
        assert_eq!(code, StatusCode::CREATED, "{answer}");
    }
    tokio::time::sleep(Duration::from_millis(3_000)).await;

    // `quick`: one run per second, consecutive ticks, all completed.
    let quick = h.runs_of("quick").await;
    println!("quick: {quick:?}");
    let ticks: Vec<i64> = quick.iter().map(|(id, _)| tick_secs(id)).collect();
    assert!(ticks.len() >= 2, "{quick:?}");
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "every second, none missed: {quick:?}");
    // `waits`: its first run waits, the ticks after it were skipped.
    let waits = h.runs_of("waits").await;
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0].1, "suspended");
    let (_, schedule) = h.get("/api/v1/schedules/waits").await;
    assert!(schedule["skipped"].as_u64().unwrap() >= 1, "{schedule}");
    // `queues`: its first run waits, the ticks after it are queued (each its own run id, in tick order).
    let queues = h.runs_of("queues").await;
    assert_eq!(queues.len(), 1, "{queues:?}");
    let first = queues[0].0.clone();
    let (_, schedule) = h.get("/api/v1/schedules/queues").await;
    let queued: Vec<String> =
        schedule["queued"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert!(!queued.is_empty(), "{schedule}");
    assert_eq!(tick_secs(&queued[0]), tick_secs(&first) + 1, "{schedule}");
    // Answered, the first run ends and the oldest queued tick starts at once, under its own tick's id.
    let answered = Instant::now();
    let (code, _) = h.post(&format!("/api/v1/runs/{first}/responses/ok"), json!({"value": "yes"})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let next = queued[0].clone();
    h.wait_runs("queues", "the queued tick starts", |runs| runs.iter().any(|(id, _)| *id == next)).await;
    println!("the queued tick started {:?} after the answer", answered.elapsed());
    let queues = h.runs_of("queues").await;
    assert_eq!(queues.iter().filter(|(_, status)| status == "completed").count(), 1, "{queues:?}");
    for id in ["waits", "queues"] {
        assert_eq!(h.delete(&format!("/api/v1/schedules/{id}")).await.0, StatusCode::OK);
    }

    // Stopped for 2.5 s: at the restart, only the latest missed tick of `quick` runs.
    let before: BTreeSet<String> = h.runs_of("quick").await.into_iter().map(|(id, _)| id).collect();
    let dir = h.stop().await;
    let stopped_at = now_ms();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let restart = now_ms();
    let h = Harness::start(dir).await;
    let last_before = before.iter().map(|id| tick_secs(id)).max().unwrap();
    h.wait_runs("quick", "a run after the restart", |runs| runs.len() > before.len()).await;
    let after: Vec<String> =
        h.runs_of("quick").await.into_iter().map(|(id, _)| id).filter(|id| !before.contains(id)).collect();
    let first_after = after.iter().map(|id| tick_secs(id)).min().unwrap();
    println!("quick: stopped after {last_before}, restarted at {restart} ms; runs after: {after:?}");
    let restart_secs = i64::try_from(restart / 1000).unwrap();
    assert!(first_after <= restart_secs + 1, "the first run after the restart is the catch-up: {after:?}");
    assert!(first_after - last_before >= 2, "the ticks of the downtime are not run: {after:?}");
    assert!(i64::try_from(stopped_at / 1000).unwrap() < first_after, "{after:?}");
    println!("the whole test took {:?} after the first runs", started.elapsed());
    h.stop().await;
}
