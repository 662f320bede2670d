//! The page of an evaluation (`agentic eval --report`, SPEC.md §6): rendered from the results document that
//! `agentic eval --out` writes, self-contained like a run report (inline CSS and JavaScript, no network).
//!
//! The header names the spec, the dataset, when it ran, the pass rate, the regressions and the flaky cases,
//! tokens, cost, latency and the mean score per evaluator; a table has a row per case and a column per
//! evaluator (a mark, the score, the reason on hover and in a row below); a filter shows all cases, the
//! failed ones, the regressions or the flaky ones; each case has a section with its inputs, its output as a
//! line diff against the expected value, its error, its repeats and a link to its run's report.
//!
//! Everything in the results comes from datasets and models: the template escapes it (minijinja's HTML
//! auto-escaping); the few values marked safe are built here with explicit escaping (links) or are our own
//! assets.

use std::collections::BTreeSet;

use minijinja::{Environment, Value as Jinja, context};
use serde::Serialize;
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::ReportError;
use crate::escape::{duration_us, html as esc, timestamp_ms, truncate};

const TEMPLATE: &str = include_str!("assets/eval.html.j2");
const BASE_CSS: &str = include_str!("assets/report.css");
const CSS: &str = include_str!("assets/eval.css");
const JS: &str = include_str!("assets/eval.js");

/// The most lines of each side a diff compares (longer values are cut, and the cut is said).
const MAX_DIFF_LINES: usize = 2_000;
/// Unchanged lines kept around each change of a diff; longer unchanged runs are folded.
const DIFF_CONTEXT: usize = 4;
/// The most characters of a value shown in full (inputs, a repeat's output).
const MAX_VALUE_CHARS: usize = 20_000;
/// The most characters of one line of a diff shown.
const MAX_LINE_CHARS: usize = 2_000;

/// How the evaluation page links each case's run to that run's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunLinks {
    /// The run reports are files beside the page: the link is relative, `DIR/FILE`, where `FILE` is
    /// [`run_report_file`] of the run id (the CLI writes each run's report under that name).
    Files {
        /// The folder of the run reports, relative to the page (`""` or `"."`: the page's own folder).
        dir: String,
    },
    /// The run pages of a server's web UI: `BASE/runs/<run id>` (the id percent-encoded).
    Server {
        /// The server's address, e.g. `http://127.0.0.1:8080` (a trailing `/` is ignored).
        base: String,
    },
}

impl RunLinks {
    /// The address of the report of run `run_id` (not HTML-escaped).
    pub fn href(&self, run_id: &str) -> String {
        match self {
            RunLinks::Files { dir } => {
                let file = url_segment(&run_report_file(run_id));
                let segments: Vec<String> = dir
                    .split('/')
                    .filter(|s| !s.is_empty() && *s != ".")
                    .map(|s| if s == ".." { s.to_string() } else { url_segment(s) })
                    .collect();
                let prefix = if dir.starts_with('/') { "/" } else { "" };
                if segments.is_empty() {
                    format!("{prefix}{file}")
                } else {
                    format!("{prefix}{}/{file}", segments.join("/"))
                }
            }
            RunLinks::Server { base } => format!("{}/runs/{}", base.trim_end_matches('/'), url_segment(run_id)),
        }
    }
}

/// The file name of the report of run `run_id` that [`RunLinks::Files`] links to: the id with every byte
/// other than ASCII letters, digits, `-`, `_` and `.` (and a leading `.`) written `%XX`, then `.html`, so
/// that any id (`eval:e1:case/1#2`) is one portable file name, and different ids are different names.
pub fn run_report_file(run_id: &str) -> String {
    let mut out = String::with_capacity(run_id.len() + 8);
    for (i, b) in run_id.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".html");
    out
}

/// The characters of a URL path segment written `%XX`: all but RFC 3986's unreserved ones.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `s` as one URL path segment (or query value): every byte but RFC 3986's unreserved characters written
/// `%XX`, so `eval:e1:case/1#2` stays one segment.
pub fn url_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()
}

/// Renders the HTML page of an evaluation from its results document (what `agentic eval --out` writes:
/// `{"eval_id", "spec", "dataset", "created_at", "repeat", "cases": [..], "summary": {..}}`); `links` says
/// how each case's run report is linked (none: the run ids are shown without links). The page is the same
/// bytes for the same document.
///
/// # Errors
/// [`ReportError::BadResults`] when the document lacks a field the page needs (`cases`, `summary` with its
/// counts, each case's `id`, `passed` and `results`, each result's `evaluator` and `passed`) or has a field
/// with another type than the results format gives it; the error names the field, e.g. `cases[1].id`.
pub fn eval_report(results: &Value, links: Option<&RunLinks>) -> Result<String, ReportError> {
    let page = build(results, links)?;
    let mut env = Environment::new();
    // The name ends in `.html`: every `{{ value }}` is HTML-escaped unless marked safe (our CSS and
    // JavaScript, and the links, escaped here).
    let rendered = env.add_template("eval.html", TEMPLATE).and_then(|()| {
        env.get_template("eval.html")?.render(context! { page => Jinja::from(minijinja::value::Serde(&page)) })
    });
    // A template that fails is a bug (the tests render it): the page says so, as the run report does.
    Ok(rendered.unwrap_or_else(|e| {
        format!(
            "<!doctype html><meta charset=\"utf-8\"><title>report error</title><pre>the evaluation page's template failed: {}</pre>",
            esc(&format!("{e:#}"))
        )
    }))
}

/// What the template shows.
#[derive(Debug, Serialize)]
struct Page {
    title: String,
    version: &'static str,
    css: String,
    js: &'static str,
    header: Header,
    evaluators: Vec<Evaluator>,
    cases: Vec<Case>,
    counts: Counts,
}

#[derive(Debug, Serialize)]
struct Header {
    eval_id: Option<String>,
    spec: Option<String>,
    spec_file: Option<String>,
    dataset: Option<String>,
    created: Option<String>,
    repeat: u64,
    /// `passed` or `failed`: as `agentic eval` exits (every case passed or the pass rate reached
    /// `min_pass`, and no regression).
    verdict: &'static str,
    pass_rate: String,
    min_pass: Option<String>,
    cases: u64,
    passed: u64,
    failed: u64,
    tokens_in: String,
    tokens_out: String,
    cost: Option<String>,
    p50: Option<String>,
    p95: Option<String>,
    mean_scores: Vec<(String, String)>,
    regressions: Vec<CaseRef>,
    flaky: Vec<CaseRef>,
}

/// A case named in the header: its id, and the anchor of its section when the document has it.
#[derive(Debug, Serialize)]
struct CaseRef {
    id: String,
    anchor: Option<String>,
}

#[derive(Debug, Serialize)]
struct Counts {
    all: usize,
    failed: usize,
    regressions: usize,
    flaky: usize,
    /// The cases whose section is open at first (failed or flaky), when they are few.
    attention: usize,
}

#[derive(Debug, Serialize)]
struct Evaluator {
    name: String,
    kind: Option<String>,
}

#[derive(Debug, Serialize)]
struct Case {
    anchor: String,
    id: String,
    passed: bool,
    regression: bool,
    flaky: bool,
    status: Option<String>,
    cells: Vec<Cell>,
    /// The results that give a reason, failed first: (evaluator, passed, reason).
    reasons: Vec<(String, bool, String)>,
    latency: Option<String>,
    tokens: Option<String>,
    model_calls: Option<u64>,
    cost: Option<String>,
    run_id: Option<String>,
    /// The link to the run's report, HTML-escaped (marked safe in the template).
    run_href: Option<String>,
    error: Option<String>,
    inputs: Option<String>,
    outcome: Outcome,
    pass_at_n: Option<String>,
    passed_share: Option<String>,
    repeats: Vec<Repeat>,
    /// The columns of the repeats' table: the evaluators that judged this case or one of its repeats.
    repeat_evaluators: Vec<Evaluator>,
    /// How many repeats passed.
    repeats_passed: usize,
}

/// One evaluator's result in a case (or a repeat).
#[derive(Debug, Serialize)]
struct Cell {
    /// `pass`, `fail`, or `none` when the case has no result of this evaluator.
    mark: &'static str,
    score: Option<String>,
    reason: Option<String>,
}

/// A case's output against its expected value.
#[derive(Debug, Serialize)]
struct Outcome {
    /// `diff` (lines in `lines`), `same` (`output` equals the expected value), `output` (no expected value),
    /// or `none` (no output).
    mode: &'static str,
    output: Option<String>,
    lines: Vec<DiffLine>,
    added: usize,
    removed: usize,
    /// Said when a side was cut before the diff.
    cut: Option<String>,
    /// `text` when both sides are strings (diffed as text), `json` otherwise.
    format: &'static str,
}

/// A line of a diff: `eq`, `del` (only in the expected value), `add` (only in the output), or `gap` (folded
/// unchanged lines; `text` says how many).
#[derive(Debug, Serialize, PartialEq)]
struct DiffLine {
    tag: &'static str,
    text: String,
}

#[derive(Debug, Serialize)]
struct Repeat {
    n: usize,
    run_id: Option<String>,
    run_href: Option<String>,
    passed: bool,
    cells: Vec<Cell>,
    output: Option<String>,
    error: Option<String>,
    latency: Option<String>,
}

/// The JSON types of the results format, for the error that names a field.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    Bool,
    Num,
    Array,
    Object,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Bool => "a boolean",
            Kind::Num => "a number",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }

    fn matches(self, v: &Value) -> bool {
        match self {
            Kind::Str => v.is_string(),
            Kind::Bool => v.is_boolean(),
            Kind::Num => v.is_number(),
            Kind::Array => v.is_array(),
            Kind::Object => v.is_object(),
        }
    }
}

/// `base.key` (or `key` at the top).
fn join(base: &str, key: &str) -> String {
    if base.is_empty() { key.to_string() } else { format!("{base}.{key}") }
}

/// The field `key` of `obj` (at path `base`), which must be there with type `kind`.
fn req<'a>(obj: &'a Value, base: &str, key: &str, kind: Kind) -> Result<&'a Value, ReportError> {
    opt(obj, base, key, kind)?.ok_or_else(|| ReportError::BadResults {
        field: join(base, key),
        expected: kind.name(),
        found: None,
    })
}

/// The field `key` of `obj` (at path `base`), when it is there and not null; of type `kind` if so.
fn opt<'a>(obj: &'a Value, base: &str, key: &str, kind: Kind) -> Result<Option<&'a Value>, ReportError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) if kind.matches(v) => Ok(Some(v)),
        Some(v) => Err(ReportError::BadResults {
            field: join(base, key),
            expected: kind.name(),
            found: Some(agentic_engine::json_type_phrase(v)),
        }),
    }
}

fn opt_str(obj: &Value, base: &str, key: &str) -> Result<Option<String>, ReportError> {
    Ok(opt(obj, base, key, Kind::Str)?.and_then(Value::as_str).map(str::to_string))
}

fn opt_f64(obj: &Value, base: &str, key: &str) -> Result<Option<f64>, ReportError> {
    Ok(opt(obj, base, key, Kind::Num)?.and_then(Value::as_f64))
}

fn opt_u64(obj: &Value, base: &str, key: &str) -> Result<Option<u64>, ReportError> {
    Ok(opt_f64(obj, base, key)?.map(|n| if n.is_finite() && n > 0.0 { n.round() as u64 } else { 0 }))
}

fn req_u64(obj: &Value, base: &str, key: &str) -> Result<u64, ReportError> {
    let n = req(obj, base, key, Kind::Num)?.as_f64().unwrap_or(0.0);
    Ok(if n.is_finite() && n > 0.0 { n.round() as u64 } else { 0 })
}

fn req_bool(obj: &Value, base: &str, key: &str) -> Result<bool, ReportError> {
    Ok(req(obj, base, key, Kind::Bool)?.as_bool().unwrap_or(false))
}

/// A list of strings (case ids), absent meaning empty.
fn str_list(obj: &Value, base: &str, key: &str) -> Result<Vec<String>, ReportError> {
    let Some(items) = opt(obj, base, key, Kind::Array)?.and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str().map(str::to_string).ok_or_else(|| ReportError::BadResults {
                field: format!("{}[{i}]", join(base, key)),
                expected: Kind::Str.name(),
                found: Some(agentic_engine::json_type_phrase(v)),
            })
        })
        .collect()
}

/// A share in 0–1 as a percentage: `66.7%`, `100%`.
fn percent(share: f64) -> String {
    let text = format!("{:.1}", share * 100.0);
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

fn score(s: f64) -> String {
    format!("{s:.2}")
}

fn latency_ms(ms: f64) -> String {
    duration_us(if ms.is_finite() && ms > 0.0 { (ms * 1_000.0).round() as u64 } else { 0 })
}

/// A value shown whole: strings as they are, anything else as pretty JSON; cut at [`MAX_VALUE_CHARS`].
fn shown(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    };
    truncate(&text, MAX_VALUE_CHARS)
}

/// A value as the text its diff compares: a string as it is when both sides are strings, pretty JSON
/// otherwise.
fn diff_text(v: &Value, as_text: bool) -> String {
    match v {
        Value::String(s) if as_text => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// The first [`MAX_DIFF_LINES`] lines of `text`, and whether it had more.
fn head_lines(text: &str) -> (String, bool) {
    let mut lines = text.split_inclusive('\n');
    let head: String = lines.by_ref().take(MAX_DIFF_LINES).collect();
    let cut = lines.next().is_some();
    (head, cut)
}

/// The line diff of `output` against `expected`: removed lines are the expected value's, added lines the
/// output's; unchanged runs longer than twice [`DIFF_CONTEXT`] are folded into a `gap` line.
fn line_diff(expected: &str, output: &str) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(expected, output);
    let groups = diff.grouped_ops(DIFF_CONTEXT);
    let total_old = expected.split_inclusive('\n').count();
    let mut lines = Vec::new();
    let mut shown_to = 0usize; // old-side lines shown or folded so far
    for group in &groups {
        let Some(first) = group.first() else { continue };
        let start = first.old_range().start;
        if start > shown_to {
            lines.push(gap(start - shown_to));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let tag = match change.tag() {
                    ChangeTag::Equal => "eq",
                    ChangeTag::Delete => "del",
                    ChangeTag::Insert => "add",
                };
                let text = truncate(change.value().trim_end_matches(['\n', '\r']), MAX_LINE_CHARS);
                lines.push(DiffLine { tag, text });
            }
            shown_to = op.old_range().end;
        }
    }
    if !groups.is_empty() && total_old > shown_to {
        lines.push(gap(total_old - shown_to));
    }
    lines
}

fn gap(n: usize) -> DiffLine {
    DiffLine { tag: "gap", text: format!("{n} unchanged line{}", if n == 1 { "" } else { "s" }) }
}

/// A case's output against its expected value.
fn outcome(output: Option<&Value>, expected: Option<&Value>) -> Outcome {
    let as_text = matches!((output, expected), (Some(Value::String(_)), Some(Value::String(_))));
    let format = if as_text { "text" } else { "json" };
    let empty = |mode, output| Outcome { mode, output, lines: Vec::new(), added: 0, removed: 0, cut: None, format };
    match (output, expected) {
        (None, _) => empty("none", None),
        (Some(out), None) => empty("output", Some(shown(out))),
        (Some(out), Some(exp)) if out == exp => empty("same", Some(shown(out))),
        (Some(out), Some(exp)) => {
            let (old, old_cut) = head_lines(&diff_text(exp, as_text));
            let (new, new_cut) = head_lines(&diff_text(out, as_text));
            let lines = line_diff(&old, &new);
            let added = lines.iter().filter(|l| l.tag == "add").count();
            let removed = lines.iter().filter(|l| l.tag == "del").count();
            let cut =
                (old_cut || new_cut).then(|| format!("only the first {MAX_DIFF_LINES} lines of each are compared"));
            Outcome { mode: "diff", output: None, lines, added, removed, cut, format }
        }
    }
}

/// One evaluator's result, as the results document has it.
#[derive(Debug)]
struct Verdict {
    evaluator: String,
    kind: Option<String>,
    passed: bool,
    score: Option<f64>,
    reason: Option<String>,
}

/// The evaluators' results of a case or a repeat (the object at `base`).
fn results_of(obj: &Value, base: &str) -> Result<Vec<Verdict>, ReportError> {
    let list = req(obj, base, "results", Kind::Array)?.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut out = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let at = format!("{}[{i}]", join(base, "results"));
        if !r.is_object() {
            return Err(ReportError::BadResults {
                field: at,
                expected: Kind::Object.name(),
                found: Some(agentic_engine::json_type_phrase(r)),
            });
        }
        out.push(Verdict {
            evaluator: req(r, &at, "evaluator", Kind::Str)?.as_str().unwrap_or_default().to_string(),
            kind: opt_str(r, &at, "kind")?,
            passed: req_bool(r, &at, "passed")?,
            score: opt_f64(r, &at, "score")?,
            reason: opt_str(r, &at, "reason")?.filter(|s| !s.is_empty()),
        });
    }
    Ok(out)
}

/// One cell per evaluator, in the columns' order.
fn cells(results: &[Verdict], evaluators: &[Evaluator]) -> Vec<Cell> {
    evaluators
        .iter()
        .map(|e| match results.iter().find(|r| r.evaluator == e.name) {
            Some(r) => Cell {
                mark: if r.passed { "pass" } else { "fail" },
                score: r.score.map(score),
                reason: r.reason.clone(),
            },
            None => Cell { mark: "none", score: None, reason: None },
        })
        .collect()
}

/// The run's error: a string, or any other value as JSON; absent when null or empty.
fn error_of(obj: &Value) -> Option<String> {
    match obj.get("error") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(truncate(s, MAX_VALUE_CHARS)),
        Some(other) => Some(truncate(&other.to_string(), MAX_VALUE_CHARS)),
    }
}

fn href(links: Option<&RunLinks>, run_id: Option<&str>) -> Option<String> {
    Some(esc(&links?.href(run_id?)))
}

/// A case or one of its repeats: the object, its path in the document, whether it passed, its results.
struct Entry<'a> {
    obj: &'a Value,
    at: String,
    passed: bool,
    results: Vec<Verdict>,
}

impl<'a> Entry<'a> {
    fn of(obj: &'a Value, at: String) -> Result<Self, ReportError> {
        if !obj.is_object() {
            return Err(ReportError::BadResults {
                field: at,
                expected: Kind::Object.name(),
                found: Some(agentic_engine::json_type_phrase(obj)),
            });
        }
        let passed = req_bool(obj, &at, "passed")?;
        let results = results_of(obj, &at)?;
        Ok(Entry { obj, at, passed, results })
    }
}

/// The page's model from the results document.
fn build(doc: &Value, links: Option<&RunLinks>) -> Result<Page, ReportError> {
    if !doc.is_object() {
        return Err(ReportError::BadResults {
            field: "(the document)".into(),
            expected: Kind::Object.name(),
            found: Some(agentic_engine::json_type_phrase(doc)),
        });
    }
    let raw_cases = req(doc, "", "cases", Kind::Array)?.as_array().map(Vec::as_slice).unwrap_or_default();
    let summary = req(doc, "", "summary", Kind::Object)?;

    // Each case's results first: the columns are the evaluators in the order they first appear.
    let mut parsed = Vec::with_capacity(raw_cases.len());
    for (i, c) in raw_cases.iter().enumerate() {
        let case = Entry::of(c, format!("cases[{i}]"))?;
        let id = req(c, &case.at, "id", Kind::Str)?.as_str().unwrap_or_default().to_string();
        let mut repeats = Vec::new();
        if let Some(list) = opt(c, &case.at, "repeats", Kind::Array)?.and_then(Value::as_array) {
            for (k, r) in list.iter().enumerate() {
                repeats.push(Entry::of(r, format!("{}.repeats[{k}]", case.at))?);
            }
        }
        parsed.push((id, case, repeats));
    }
    let mut evaluators: Vec<Evaluator> = Vec::new();
    let mut seen = BTreeSet::new();
    let all_results =
        parsed.iter().flat_map(|(_, c, reps)| c.results.iter().chain(reps.iter().flat_map(|r| r.results.iter())));
    for r in all_results {
        if seen.insert(r.evaluator.clone()) {
            evaluators.push(Evaluator { name: r.evaluator.clone(), kind: r.kind.clone() });
        }
    }
    let mean_scores: Vec<(String, f64)> = match opt(summary, "summary", "mean_scores", Kind::Object)? {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                v.as_f64().map(|x| (k.clone(), x)).ok_or_else(|| ReportError::BadResults {
                    field: format!("summary.mean_scores.{k}"),
                    expected: Kind::Num.name(),
                    found: Some(agentic_engine::json_type_phrase(v)),
                })
            })
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    for (name, _) in &mean_scores {
        if seen.insert(name.clone()) {
            evaluators.push(Evaluator { name: name.clone(), kind: None });
        }
    }

    let regressions = str_list(summary, "summary", "regressions")?;
    let flaky_ids = str_list(summary, "summary", "flaky")?;
    let mut cases = Vec::with_capacity(parsed.len());
    for (i, (id, case, repeats)) in parsed.into_iter().enumerate() {
        let Entry { obj: c, at, passed, results } = case;
        let run_id = opt_str(c, &at, "run_id")?;
        let mut reasons: Vec<(String, bool, String)> = results
            .iter()
            .filter_map(|r| r.reason.as_ref().map(|why| (r.evaluator.clone(), r.passed, why.clone())))
            .collect();
        reasons.sort_by_key(|r| r.1); // failed first, stable otherwise
        let usage = opt(c, &at, "usage", Kind::Object)?;
        let uat = join(&at, "usage");
        let (tokens, model_calls, cost) = match usage {
            Some(u) => {
                let input = opt_u64(u, &uat, "input_tokens")?;
                let output = opt_u64(u, &uat, "output_tokens")?;
                let tokens = (input.is_some() || output.is_some())
                    .then(|| (input.unwrap_or(0) + output.unwrap_or(0)).to_string());
                (
                    tokens,
                    opt_u64(u, &uat, "model_calls")?,
                    opt_f64(u, &uat, "cost_usd")?.map(agentic_engine::budget::usd),
                )
            }
            None => (None, None, None),
        };
        let flaky =
            opt(c, &at, "flaky", Kind::Bool)?.and_then(Value::as_bool).unwrap_or(false) || flaky_ids.contains(&id);
        let pass_at_n = match c.get("pass_at_n") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(if *b { "yes".to_string() } else { "no".to_string() }),
            Some(Value::Number(n)) => Some(n.as_f64().map(percent).unwrap_or_else(|| n.to_string())),
            Some(other) => Some(other.to_string()),
        };
        // The repeats' columns: the evaluators that judged this case or one of its repeats.
        let repeat_evaluators: Vec<Evaluator> = evaluators
            .iter()
            .filter(|e| {
                let of = |rs: &[Verdict]| rs.iter().any(|r| r.evaluator == e.name);
                of(&results) || repeats.iter().any(|r| of(&r.results))
            })
            .map(|e| Evaluator { name: e.name.clone(), kind: e.kind.clone() })
            .collect();
        let repeats_passed = repeats.iter().filter(|r| r.passed).count();
        let mut reps = Vec::with_capacity(repeats.len());
        for (k, Entry { obj: r, at: rat, passed: rpassed, results: rresults }) in repeats.into_iter().enumerate() {
            let rid = opt_str(r, &rat, "run_id")?;
            reps.push(Repeat {
                n: k + 1,
                run_href: href(links, rid.as_deref()),
                run_id: rid,
                passed: rpassed,
                cells: cells(&rresults, &repeat_evaluators),
                output: r.get("output").filter(|v| !v.is_null()).map(|v| truncate(&shown(v), 400)),
                error: error_of(r),
                latency: opt_f64(r, &rat, "latency_ms")?.map(latency_ms),
            });
        }
        cases.push(Case {
            anchor: format!("case-{}", i + 1),
            regression: regressions.contains(&id),
            flaky,
            passed,
            status: opt_str(c, &at, "status")?,
            cells: cells(&results, &evaluators),
            reasons,
            latency: opt_f64(c, &at, "latency_ms")?.map(latency_ms),
            tokens,
            model_calls,
            cost,
            run_href: href(links, run_id.as_deref()),
            run_id,
            error: error_of(c),
            inputs: c.get("inputs").filter(|v| !v.is_null()).map(shown),
            outcome: outcome(c.get("output").filter(|v| !v.is_null()), c.get("expected").filter(|v| !v.is_null())),
            pass_at_n,
            passed_share: opt_f64(c, &at, "passed_share")?.map(percent),
            repeats: reps,
            repeat_evaluators,
            repeats_passed,
            id,
        });
    }

    let case_ref =
        |id: &String| CaseRef { id: id.clone(), anchor: cases.iter().find(|c| c.id == *id).map(|c| c.anchor.clone()) };
    let n_cases = req_u64(summary, "summary", "cases")?;
    let passed = req_u64(summary, "summary", "passed")?;
    let failed = req_u64(summary, "summary", "failed")?;
    let pass_rate = req(summary, "summary", "pass_rate", Kind::Num)?.as_f64().unwrap_or(0.0);
    let min_pass = opt_f64(summary, "summary", "min_pass")?;
    let verdict_ok = (failed == 0 || min_pass.is_some_and(|m| pass_rate >= m)) && regressions.is_empty();
    let (tokens_in, tokens_out) = match opt(summary, "summary", "tokens", Kind::Object)? {
        Some(t) => {
            (opt_u64(t, "summary.tokens", "input")?.unwrap_or(0), opt_u64(t, "summary.tokens", "output")?.unwrap_or(0))
        }
        None => (0, 0),
    };
    let (p50, p95) = match opt(summary, "summary", "latency_ms", Kind::Object)? {
        Some(l) => (
            opt_f64(l, "summary.latency_ms", "p50")?.map(latency_ms),
            opt_f64(l, "summary.latency_ms", "p95")?.map(latency_ms),
        ),
        None => (None, None),
    };
    let created = match doc.get("created_at") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => n.as_u64().map(timestamp_ms),
        _ => None,
    };
    let header = Header {
        eval_id: opt_str(doc, "", "eval_id")?,
        spec: opt_str(doc, "", "spec")?,
        spec_file: opt_str(doc, "", "spec_file")?,
        dataset: opt_str(doc, "", "dataset")?,
        created,
        repeat: opt_u64(doc, "", "repeat")?.unwrap_or(1).max(1),
        verdict: if verdict_ok { "passed" } else { "failed" },
        pass_rate: percent(pass_rate),
        min_pass: min_pass.map(percent),
        cases: n_cases,
        passed,
        failed,
        tokens_in: tokens_in.to_string(),
        tokens_out: tokens_out.to_string(),
        cost: opt_f64(summary, "summary", "cost_usd")?.map(agentic_engine::budget::usd),
        p50,
        p95,
        mean_scores: mean_scores.iter().map(|(k, v)| (k.clone(), score(*v))).collect(),
        regressions: regressions.iter().map(case_ref).collect(),
        flaky: flaky_ids.iter().map(case_ref).collect(),
    };
    let counts = Counts {
        all: cases.len(),
        failed: cases.iter().filter(|c| !c.passed).count(),
        regressions: cases.iter().filter(|c| c.regression).count(),
        flaky: cases.iter().filter(|c| c.flaky).count(),
        attention: cases.iter().filter(|c| !c.passed || c.flaky).count(),
    };
    let name = header.spec.clone().or_else(|| header.eval_id.clone()).unwrap_or_else(|| "evaluation".into());
    Ok(Page {
        title: format!("{name} · evaluation · agentic report"),
        version: env!("CARGO_PKG_VERSION"),
        css: format!("{BASE_CSS}\n{CSS}"),
        js: JS,
        header,
        evaluators,
        cases,
        counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PROBE: &str = r#"<img src=x onerror="document.body.dataset.xss=1">"#;

    /// Three cases: one passes, one fails (a reason, a diff), one is flaky over two repeats.
    fn three_cases() -> Value {
        json!({
            "eval_id": "e-42", "spec": "support-bot", "spec_file": "specs/support.yaml",
            "dataset": "data/support.jsonl", "created_at": "2026-12-06T10:00:00Z", "repeat": 2,
            "cases": [
                {"id": "add-small", "passed": true, "run_id": "eval:e-42:add-small", "status": "completed",
                 "results": [
                    {"evaluator": "exact", "kind": "equals", "passed": true, "score": 1.0, "reason": null},
                    {"evaluator": "judge", "kind": "judge", "passed": true, "score": 0.9, "reason": "correct sum"}],
                 "inputs": {"question": "2+2?"}, "expected": {"total": 4}, "output": {"total": 4}, "error": null,
                 "latency_ms": 12.5,
                 "usage": {"input_tokens": 1200, "output_tokens": 34, "model_calls": 1, "cost_usd": 0.0021},
                 "pass_at_n": true, "passed_share": 1.0, "flaky": false},
                {"id": "refund-policy", "passed": false, "run_id": "eval:e-42:refund-policy", "status": "completed",
                 "results": [
                    {"evaluator": "exact", "kind": "equals", "passed": false, "score": 0.0,
                     "reason": "output differs from expected"},
                    {"evaluator": "judge", "kind": "judge", "passed": false, "score": 0.3,
                     "reason": "misses the 30-day window"}],
                 "inputs": {"question": "How long for refunds?"},
                 "expected": {"answer": "30 days", "cites": ["policy.md"]},
                 "output": {"answer": "14 days", "cites": ["policy.md"]},
                 "error": null, "latency_ms": 840.0,
                 "usage": {"input_tokens": 900, "output_tokens": 60, "model_calls": 2, "cost_usd": null},
                 "pass_at_n": false, "passed_share": 0.0, "flaky": false},
                {"id": "greeting", "passed": true, "run_id": "eval:e-42:greeting", "status": "completed",
                 "results": [{"evaluator": "judge", "kind": "judge", "passed": true, "score": 0.8, "reason": "friendly"}],
                 "inputs": {"name": "Ada"}, "expected": null, "output": "Hello Ada!", "error": null,
                 "latency_ms": 1500,
                 "repeats": [
                    {"run_id": "eval:e-42:greeting#1", "passed": true, "output": "Hello Ada!", "error": null,
                     "latency_ms": 1500,
                     "results": [{"evaluator": "judge", "kind": "judge", "passed": true, "score": 0.8, "reason": "friendly"}]},
                    {"run_id": "eval:e-42:greeting#2", "passed": false, "output": null, "error": "model timed out",
                     "latency_ms": 30000,
                     "results": [{"evaluator": "judge", "kind": "judge", "passed": false, "score": 0.1, "reason": "no answer"}]}],
                 "pass_at_n": true, "passed_share": 0.5, "flaky": true}],
            "summary": {"cases": 3, "passed": 2, "failed": 1, "pass_rate": 0.6667, "min_pass": 0.5,
                        "mean_scores": {"exact": 0.5, "judge": 0.6667},
                        "tokens": {"input": 2100, "output": 94}, "cost_usd": 0.0021,
                        "latency_ms": {"p50": 840.0, "p95": 1500.0},
                        "regressions": ["refund-policy"], "flaky": ["greeting"]}
        })
    }

    /// The `<tr class="case" ..>` row of the case with anchor `anchor`.
    fn row<'a>(html: &'a str, anchor: &str) -> &'a str {
        let start = html.find(r#"<tr class="case c-"#).unwrap();
        let at = html[start..].find(&format!(r#"data-case="{anchor}""#)).unwrap() + start;
        let begin = html[..at].rfind("<tr").unwrap();
        let end = html[begin..].find("</tr>").unwrap() + begin + "</tr>".len();
        &html[begin..end]
    }

    #[test]
    fn the_table_has_a_cell_per_case_and_evaluator() {
        let html = eval_report(&three_cases(), Some(&RunLinks::Files { dir: "runs".into() })).unwrap();
        let add = row(&html, "case-1");
        assert_eq!(
            add,
            concat!(
                r#"<tr class="case c-pass" data-case="case-1" data-passed="1" data-regression="0" data-flaky="0">"#,
                r##"<td class="cid"><a href="#case-1">add-small</a></td>"##,
                r#"<td class="res"><span class="mark m-pass">passed</span></td>"#,
                r#"<td class="ev ev-pass">✓ <span class="score">1.00</span></td>"#,
                r#"<td class="ev ev-pass" title="correct sum">✓ <span class="score">0.90</span></td>"#,
                r#"<td class="num">12.5 ms</td><td class="num">1234</td><td class="num">$0.002100</td>"#,
                r#"<td class="run"><a href="runs/eval%253Ae-42%253Aadd-small.html" title="eval:e-42:add-small">report</a></td></tr>"#,
            )
        );
        let refund = row(&html, "case-2");
        assert!(refund.starts_with(
            r#"<tr class="case c-fail" data-case="case-2" data-passed="0" data-regression="1" data-flaky="0">"#
        ));
        assert!(refund.contains(
            r##"<td class="cid"><a href="#case-2">refund-policy</a> <span class="chip err">regression</span></td><td class="res"><span class="mark m-fail">failed</span></td>"##
        ));
        assert!(refund.contains(concat!(
            r#"<td class="ev ev-fail" title="output differs from expected">✗ <span class="score">0.00</span></td>"#,
            r#"<td class="ev ev-fail" title="misses the 30-day window">✗ <span class="score">0.30</span></td>"#,
            r#"<td class="num">840.0 ms</td><td class="num">960</td><td class="num"></td>"#,
        )));
        let greeting = row(&html, "case-3");
        assert!(greeting.contains(r#"data-passed="1" data-regression="0" data-flaky="1""#));
        assert!(greeting.contains(concat!(
            r#"<span class="chip flaky">flaky</span></td><td class="res"><span class="mark m-pass">passed</span></td>"#,
            r#"<td class="ev ev-none">–</td>"#,
            r#"<td class="ev ev-pass" title="friendly">✓ <span class="score">0.80</span></td>"#,
            r#"<td class="num">1.50 s</td>"#,
        )));
        // The reasons again, in a row under the case, failed first.
        assert!(html.contains(concat!(
            r#"<tr class="reasons" data-case="case-2" data-passed="0" data-regression="1" data-flaky="0"><td></td><td colspan="7">"#,
            r#"<div class="why why-fail"><b>exact</b>: output differs from expected</div>"#,
            r#"<div class="why why-fail"><b>judge</b>: misses the 30-day window</div></td></tr>"#,
        )));
        assert!(html.contains(concat!(
            r#"<tr class="reasons" data-case="case-1" data-passed="1" data-regression="0" data-flaky="0"><td></td><td colspan="7">"#,
            r#"<div class="why why-pass"><b>judge</b>: correct sum</div></td></tr>"#,
        )));
    }

    #[test]
    fn the_header_names_the_outcome_regressions_and_flaky_cases() {
        let html = eval_report(&three_cases(), None).unwrap();
        assert!(html.contains("<title>support-bot · evaluation · agentic report</title>"));
        assert!(
            html.contains(r#"<span class="status st-failed" id="eval-verdict">failed</span>"#),
            "a regression fails it"
        );
        assert!(html.contains(r#"<dd id="eval-pass-rate">66.7%</dd><small class="muted">minimum 50%</small>"#));
        assert!(html.contains(r#"<dd class="ok" id="eval-passed">2</dd><small class="muted">of 3 cases</small>"#));
        assert!(html.contains(r#"<dd id="eval-tokens">2100 · 94</dd>"#));
        assert!(html.contains(r#"<dd id="eval-cost">$0.002100</dd>"#));
        assert!(html.contains(r#"<dd id="eval-latency">840.0 ms · 1.50 s</dd>"#));
        assert!(html.contains(
            r#"<span class="mean"><span class="mean-name">exact</span> <b>0.50</b></span> <span class="mean"><span class="mean-name">judge</span> <b>0.67</b></span>"#
        ));
        assert!(html.contains(
            r##"passed in the baseline, fail now:
  <a href="#case-2"><code>refund-policy</code></a>"##
        ));
        assert!(html.contains(
            r##"passed in some repeats, not in all:
  <a href="#case-3"><code>greeting</code></a>"##
        ));
        assert!(html.contains(r#"<button type="button" data-filter="failed" aria-pressed="false">Failed <span class="n">1</span></button>"#));
        // Without links, the run ids are shown as text.
        assert!(html.contains(r#"<td class="run"><code title="eval:e-42:add-small">eval:e-42:add-small</code></td>"#));
        assert!(!html.contains("run-link"));
    }

    #[test]
    fn a_failed_case_shows_its_output_as_a_diff_against_the_expected_value() {
        let html = eval_report(&three_cases(), None).unwrap();
        let section = &html[html.find(r#"id="case-2""#).unwrap()..html.find(r#"id="case-3""#).unwrap()];
        assert!(section.contains(r#"data-flaky="0" open>"#), "a failed case is open");
        assert!(section.contains("· 1 removed, 1 added</span></h4>"));
        assert!(section.contains(concat!(
            r#"<div class="ldiff" data-format="json">"#,
            r#"<div class="dl eq">{</div>"#,
            r#"<div class="dl del">  &quot;answer&quot;: &quot;30 days&quot;,</div>"#,
            r#"<div class="dl add">  &quot;answer&quot;: &quot;14 days&quot;,</div>"#,
            r#"<div class="dl eq">  &quot;cites&quot;: [</div>"#,
        )));
        assert!(section.contains(
            r#"<pre class="inputs">{
  &quot;question&quot;: &quot;How long for refunds?&quot;
}</pre>"#
        ));
        // The passing case's output equals its expected value: no diff.
        let first = &html[html.find(r#"id="case-1""#).unwrap()..html.find(r#"id="case-2""#).unwrap()];
        assert!(first.contains(r#"<span class="legend-diff ok">equals the expected value</span>"#));
        assert!(!first.contains("ldiff") && !first.contains(" open>"));
    }

    #[test]
    fn a_flaky_case_lists_each_repeat() {
        let html =
            eval_report(&three_cases(), Some(&RunLinks::Server { base: "http://127.0.0.1:8080/".into() })).unwrap();
        let section = &html[html.find(r#"id="case-3""#).unwrap()..];
        assert!(section.contains("<h4>Repeats · 1 of 2 passed (50%) · pass@2: yes</h4>"));
        assert!(section.contains(concat!(
            r#"<tr class="repeat c-fail"><td class="num">2</td><td><span class="mark m-fail">failed</span></td>"#,
            r#"<td class="ev ev-fail" title="no answer">✗ <span class="score">0.10</span></td>"#,
            r#"<td class="num">30.0 s</td><td class="rep-out"><span class="err-text">model timed out</span></td>"#,
            r#"<td class="run"><a href="http://127.0.0.1:8080/runs/eval%3Ae-42%3Agreeting%232" title="eval:e-42:greeting#2">report</a></td></tr>"#,
        )));
        assert!(section.contains(r#"<td class="rep-out"><code>Hello Ada!</code></td>"#));
        assert!(section.contains(
            r#"<a class="run-link" href="http://127.0.0.1:8080/runs/eval%3Ae-42%3Agreeting">open its report</a>"#
        ));
        assert!(section.contains(
            r#"<span class="legend-diff">no expected value</span></h4><pre class="output">Hello Ada!</pre>"#
        ));
    }

    #[test]
    fn everything_from_the_results_is_escaped() {
        let mut doc = three_cases();
        doc["spec"] = json!(PROBE);
        doc["cases"][1]["id"] = json!(PROBE);
        doc["cases"][1]["output"] = json!({"answer": PROBE});
        doc["cases"][1]["results"][1]["reason"] = json!(PROBE);
        doc["cases"][1]["error"] = json!(PROBE);
        doc["cases"][1]["run_id"] = json!(PROBE);
        doc["cases"][1]["inputs"] = json!({PROBE: PROBE});
        doc["summary"]["regressions"] = json!([PROBE]);
        doc["summary"]["mean_scores"] = json!({PROBE: 0.5});
        for links in
            [None, Some(RunLinks::Files { dir: "runs".into() }), Some(RunLinks::Server { base: "http://h".into() })]
        {
            let html = eval_report(&doc, links.as_ref()).unwrap();
            assert!(!html.contains("<img"), "no markup from the results survives");
            assert!(html.contains(
                r##"<td class="cid"><a href="#case-2">&lt;img src=x onerror=&quot;document.body.dataset.xss=1&quot;&gt;</a>"##
            ));
            assert!(html.contains(
                r#"title="&lt;img src=x onerror=&quot;document.body.dataset.xss=1&quot;&gt;">✗ <span class="score">0.30</span>"#
            ));
            assert!(html.contains(
                r#"<div class="dl add">  &quot;answer&quot;: &quot;&lt;img src=x onerror=\&quot;document.body.dataset.xss=1\&quot;&gt;&quot;</div>"#
            ));
            assert!(html.contains(r#"<pre>&lt;img src=x onerror=&quot;document.body.dataset.xss=1&quot;&gt;</pre>"#));
        }
        let html = eval_report(&doc, Some(&RunLinks::Files { dir: "runs".into() })).unwrap();
        assert!(html.contains(
            r#"href="runs/%253Cimg%2520src%253Dx%2520onerror%253D%2522document.body.dataset.xss%253D1%2522%253E.html""#
        ));
    }

    #[test]
    fn a_document_without_a_required_field_is_an_error_naming_it() {
        type Change = Box<dyn Fn(&mut Value)>;
        let cases: [(&str, Change, &str); 6] = [
            (
                "no cases",
                Box::new(|d| drop(d.as_object_mut().unwrap().remove("cases"))),
                "the evaluation results have no `cases` (an array)",
            ),
            (
                "no summary",
                Box::new(|d| drop(d.as_object_mut().unwrap().remove("summary"))),
                "the evaluation results have no `summary` (an object)",
            ),
            (
                "a case without id",
                Box::new(|d| drop(d["cases"][1].as_object_mut().unwrap().remove("id"))),
                "the evaluation results have no `cases[1].id` (a string)",
            ),
            (
                "a result without evaluator",
                Box::new(|d| d["cases"][2]["repeats"][1]["results"][0]["evaluator"] = Value::Null),
                "the evaluation results have no `cases[2].repeats[1].results[0].evaluator` (a string)",
            ),
            (
                "a passed that is a string",
                Box::new(|d| d["cases"][0]["passed"] = json!("yes")),
                "the evaluation results have `cases[0].passed` as a string, not a boolean",
            ),
            (
                "a pass rate missing",
                Box::new(|d| drop(d["summary"].as_object_mut().unwrap().remove("pass_rate"))),
                "the evaluation results have no `summary.pass_rate` (a number)",
            ),
        ];
        for (what, change, message) in cases {
            let mut doc = three_cases();
            change(&mut doc);
            let err = eval_report(&doc, None).expect_err(what);
            assert!(matches!(err, ReportError::BadResults { .. }), "{what}: {err:?}");
            assert_eq!(err.to_string(), message, "{what}");
        }
        let err = eval_report(&json!([1]), None).unwrap_err();
        assert_eq!(err.to_string(), "the evaluation results have `(the document)` as an array, not an object");
    }

    #[test]
    fn a_minimal_document_renders() {
        // What `agentic eval --json` prints (SPEC.md §6): cases with their results and run ids, a summary.
        let doc = json!({"cases": [{"id": "a", "passed": true, "results": [], "run_id": "r"}],
                         "summary": {"cases": 1, "passed": 1, "failed": 0, "pass_rate": 1.0}});
        let html = eval_report(&doc, None).unwrap();
        assert!(html.contains(r#"<span class="status st-passed" id="eval-verdict">passed</span>"#));
        assert!(html.contains(r#"<dd id="eval-pass-rate">100%</dd>"#));
        assert!(html.contains("<h4>Output</h4><p class=\"muted\">No output.</p>"));
        let empty =
            eval_report(&json!({"cases": [], "summary": {"cases": 0, "passed": 0, "failed": 0, "pass_rate": 0}}), None)
                .unwrap();
        assert!(empty.contains("The evaluation has no cases."));
    }

    #[test]
    fn a_long_text_diff_folds_unchanged_lines() {
        let old: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 15\n", "line fifteen\n");
        let lines = line_diff(&old, &new);
        let tags: Vec<&str> = lines.iter().map(|l| l.tag).collect();
        assert_eq!(tags, ["gap", "eq", "eq", "eq", "eq", "del", "add", "eq", "eq", "eq", "eq", "gap"]);
        assert_eq!(lines[0].text, "10 unchanged lines");
        assert_eq!(lines[5], DiffLine { tag: "del", text: "line 15".into() });
        assert_eq!(lines[6], DiffLine { tag: "add", text: "line fifteen".into() });
        assert_eq!(lines[11].text, "11 unchanged lines");
        // Two strings are diffed as text, not as JSON strings.
        let o = outcome(Some(&json!("a\nb\nc")), Some(&json!("a\nB\nc")));
        assert_eq!(o.format, "text");
        assert_eq!((o.removed, o.added), (1, 1));
        assert_eq!(o.lines[1], DiffLine { tag: "del", text: "B".into() });
    }

    #[test]
    fn run_report_files_are_portable_and_distinct() {
        assert_eq!(run_report_file("eval:e1:case-1"), "eval%3Ae1%3Acase-1.html");
        assert_eq!(run_report_file("eval:e1:a/b#2"), "eval%3Ae1%3Aa%2Fb%232.html");
        assert_eq!(run_report_file("..x"), "%2E.x.html");
        assert_ne!(run_report_file("a:b"), run_report_file("a%3Ab"));
        let files = RunLinks::Files { dir: "./my runs/".into() };
        assert_eq!(files.href("eval:e1:c"), "my%20runs/eval%253Ae1%253Ac.html");
        assert_eq!(RunLinks::Files { dir: String::new() }.href("r1"), "r1.html");
        assert_eq!(RunLinks::Files { dir: "../out".into() }.href("r1"), "../out/r1.html");
        assert_eq!(RunLinks::Server { base: "http://h:1/".into() }.href("a b"), "http://h:1/runs/a%20b");
    }
}
