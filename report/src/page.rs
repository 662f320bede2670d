//! The page: one minijinja template with HTML auto-escaping, inline CSS and JavaScript, the topology SVG and
//! the script's data as escaped JSON.

use agentic_engine::{RunRecord, StepRecord, TopologyNode};
use minijinja::{Environment, Value, context};

use crate::escape::{html as esc, script_json};
use crate::{model, topology};

const TEMPLATE: &str = include_str!("assets/report.html.j2");
const CSS: &str = include_str!("assets/report.css");
const JS: &str = include_str!("assets/report.js");

fn render(ctx: Value) -> String {
    let mut env = Environment::new();
    // The name ends in `.html`: every `{{ value }}` is HTML-escaped unless marked safe (only our own CSS,
    // JavaScript, SVG built with explicit escaping, and JSON with `<`, `>`, `&` escaped are).
    let rendered =
        env.add_template("report.html", TEMPLATE).and_then(|()| env.get_template("report.html")?.render(ctx));
    match rendered {
        Ok(html) => html,
        Err(e) => format!(
            "<!doctype html><meta charset=\"utf-8\"><title>report error</title><pre>the report template failed: {}</pre>",
            esc(&format!("{e:#}"))
        ),
    }
}

fn safe(text: impl Into<String>) -> Value {
    Value::from_safe_string(text.into())
}

/// A run's page.
pub(crate) fn run_page(
    topology: Option<&TopologyNode>,
    reason: Option<&str>,
    run: &RunRecord,
    records: &[StepRecord],
) -> String {
    page(topology, reason, model::build(topology, run, records), run)
}

/// The page of a session of the in-process monitor: its run record, its steps, and the loop iteration of each
/// step (by `seq`); the header says where the data comes from.
pub(crate) fn monitor_page(
    topology: Option<&TopologyNode>,
    reason: Option<&str>,
    run: &RunRecord,
    records: &[StepRecord],
    iterations: &std::collections::BTreeMap<u64, u64>,
    origin: &str,
) -> String {
    let mut m = model::build_with(topology, run, records, iterations);
    m.summary.origin = Some(origin.to_string());
    page(topology, reason, m, run)
}

fn page(topology: Option<&TopologyNode>, reason: Option<&str>, m: model::RunModel, run: &RunRecord) -> String {
    let svg = topology.map(|t| safe(topology::svg(t, &m.annotations)));
    render(context! {
        mode => "run",
        title => format!("{} · {} · agentic report", run.name, run.run_id),
        version => env!("CARGO_PKG_VERSION"),
        summary => Value::from(minijinja::value::Serde(&m.summary)),
        milestones => Value::from(minijinja::value::Serde(&m.milestones)),
        agents => Value::from(minijinja::value::Serde(&m.agents)),
        errors => Value::from(minijinja::value::Serde(&m.errors)),
        calls => Value::from(minijinja::value::Serde(&m.calls)),
        topology_svg => svg,
        topology_note => reason.unwrap_or("the run's topology is unknown"),
        data_json => safe(script_json(&m.data)),
        css => safe(CSS),
        js => safe(JS),
    })
}

/// A topology page.
pub(crate) fn topology_page(root: &TopologyNode, name: &str) -> String {
    let svg = topology::svg(root, &model::Annotations::default());
    let (agents, composites, keys) = topology::counts(root);
    render(context! {
        mode => "topology",
        title => format!("{name} · topology · agentic report"),
        name => name,
        version => env!("CARGO_PKG_VERSION"),
        counts => vec![agents, composites, keys],
        topology_svg => safe(svg),
        css => safe(CSS),
        js => safe(JS),
    })
}
