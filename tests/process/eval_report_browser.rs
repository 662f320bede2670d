//! The HTML page of an evaluation (`agentic eval --report`, SPEC.md §6) in a real browser (headless Chromium),
//! rendered from a fixed results document (`tests/fixtures/eval_results.json`, no eval run): the page's
//! script runs without console errors, no string from the results runs as markup (an XSS probe in a case
//! id, an output, a reason, an error and a run id stays text), the filter (`#filter=failed`) hides the
//! passing cases, and a case's link leads to the run report file the CLI writes beside the page. The
//! screenshot is kept in `target/tmp/report/eval.png` for review.
//!
//! Skipped with a message when Chromium is not installed, unless `AGENTIC_REQUIRE_BROWSER` is set (CI sets it).

use super::report_browser::{chromium, console_errors, out_dir, run_chromium, run_chromium_url};
use agentic_report::{RunLinks, eval_report, run_report_file, write_report};

const PROBE: &str = r#"<img src=x onerror="document.body.dataset.xss=1">"#;
const RESULTS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/eval_results.json"));

/// The opening tags of the case rows in a DOM dump: (data-case, passed, hidden).
fn case_rows(dom: &str) -> Vec<(String, bool, bool)> {
    dom.match_indices(r#"<tr class="case "#)
        .map(|(at, _)| {
            let tag = &dom[at..at + dom[at..].find('>').unwrap()];
            let attr = |name: &str| {
                let start = tag.find(&format!(r#"{name}=""#)).unwrap() + name.len() + 2;
                tag[start..start + tag[start..].find('"').unwrap()].to_string()
            };
            (attr("data-case"), attr("data-passed") == "1", tag.contains(" hidden"))
        })
        .collect()
}

#[test]
fn the_eval_page_renders_in_chromium_filters_and_escapes_everything() {
    let results: serde_json::Value = serde_json::from_str(RESULTS).unwrap();
    let html = eval_report(&results, Some(&RunLinks::Files { dir: "runs".into() })).unwrap();
    assert!(!html.contains(PROBE), "no probe survives unescaped in the page source");
    assert!(!html.contains("<img"));

    let dir = out_dir();
    let page = dir.join("eval.html");
    write_report(&page, &html).unwrap();
    // The run report of one case, where the CLI writes it: `runs/` beside the page, named by run id.
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let run_id = "eval:e-20261206:refund-window";
    write_report(
        runs.join(run_report_file(run_id)),
        "<!doctype html><meta charset=\"utf-8\"><title>run</title><p id=\"stub-run\">the run report of refund-window</p>",
    )
    .unwrap();

    let Some(browser) = chromium() else {
        if std::env::var_os("AGENTIC_REQUIRE_BROWSER").is_some() {
            panic!("AGENTIC_REQUIRE_BROWSER is set but Chromium was not found (install Debian's `chromium`)");
        }
        eprintln!("SKIPPED: Chromium not found (apt-get install -y chromium); the browser checks did not run");
        return;
    };

    let shot = dir.join("eval.png");
    let _ = std::fs::remove_file(&shot);
    let (_, log) = run_chromium(&browser, &page, &[&format!("--screenshot={}", shot.display())]);
    assert!(shot.is_file(), "no screenshot of the eval page: {log}");
    assert!(console_errors(&log).is_empty(), "console errors: {:?}", console_errors(&log));

    // All cases: every row shown, the probe as text everywhere.
    let (dom, log) = run_chromium(&browser, &page, &["--dump-dom"]);
    assert!(console_errors(&log).is_empty(), "console errors: {:?}", console_errors(&log));
    std::fs::write(dir.join("eval.dom.html"), &dom).unwrap();
    assert!(dom.contains(r#"data-ready="1""#), "the page's script finished");
    assert!(!dom.contains(r#"data-js-error=""#), "the page's script failed");
    assert!(!dom.contains("data-xss"), "the XSS probe ran");
    assert!(!dom.contains("<img"), "no image element was created from the results");
    let probe_text = r#"&lt;img src=x onerror="document.body.dataset.xss=1"&gt;"#;
    assert!(dom.contains(&format!(r##"<td class="cid"><a href="#case-4">{probe_text}</a>"##)), "the case id is text");
    assert!(dom.contains(&format!(r#"<div class="why why-fail"><b>exact</b>: {probe_text}</div>"#)), "the reason");
    assert!(dom.contains(&format!(r#"<pre>agent `writer` (root/0) failed: {probe_text}</pre>"#)), "the error");
    assert!(
        dom.contains(&format!(r#"<div class="dl add">  "answer": "{}"</div>"#, probe_text.replace('"', r#"\""#))),
        "the output, in the diff"
    );
    let rows = case_rows(&dom);
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|(_, _, hidden)| !hidden), "no filter at first: {rows:?}");
    assert!(dom.contains(r#"<html lang="en" data-report="eval" data-filter="all" data-ready="1">"#));
    assert!(dom.contains(r#"<span class="status st-failed" id="eval-verdict">failed</span>"#));
    assert!(dom.contains(r#"<div class="dl del">Revenue grew 12% year over year.</div><div class="dl add">Revenue grew 21% year over year.</div>"#));

    // The filter to the failed cases hides the passing ones (rows and sections), and says how many show.
    let url = format!("file://{}#filter=failed", page.display());
    let (dom, log) = run_chromium_url(&browser, &url, &["--dump-dom"]);
    assert!(console_errors(&log).is_empty(), "console errors: {:?}", console_errors(&log));
    std::fs::write(dir.join("eval-failed.dom.html"), &dom).unwrap();
    assert!(dom.contains(r#"data-filter="failed""#) && !dom.contains("data-xss"));
    let rows = case_rows(&dom);
    assert_eq!(rows.len(), 6);
    for (case, passed, hidden) in &rows {
        assert_eq!(passed, hidden, "{case}: a passing case is hidden, a failed one shown");
    }
    assert_eq!(rows.iter().filter(|r| !r.2).count(), 3);
    assert!(dom.contains(r#"<details class="case-detail c-pass" id="case-1" data-case="case-1" data-passed="1" data-regression="0" data-flaky="0" hidden="">"#));
    assert!(dom.contains(r#"<span id="filter-note" class="muted small">3 of 6 cases shown</span>"#));
    assert!(dom.contains(r#"<button type="button" data-filter="failed" aria-pressed="true">"#));

    // The regressions: the two cases named in the summary.
    let url = format!("file://{}#filter=regressions", page.display());
    let (dom, _) = run_chromium_url(&browser, &url, &["--dump-dom"]);
    let shown: Vec<String> = case_rows(&dom).into_iter().filter(|r| !r.2).map(|r| r.0).collect();
    assert_eq!(shown, ["case-2", "case-4"]);

    // A case's link leads to the run report written under `run_report_file`.
    let href = "runs/eval%253Ae-20261206%253Arefund-window.html";
    assert!(html.contains(&format!(r#"<a class="run-link" href="{href}">open its report</a>"#)));
    let (run_dom, _) = run_chromium_url(&browser, &format!("file://{}/{href}", dir.display()), &["--dump-dom"]);
    assert!(run_dom.contains("the run report of refund-window"), "the link resolves to the run's file: {run_dom}");
}
