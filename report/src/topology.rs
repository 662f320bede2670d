//! The topology diagram: the agent tree laid out left to right (a tidy tree: leaves on consecutive rows,
//! parents centred on their children), and a column of state keys on the right with data-flow edges
//! producer → key → consumer. Built as an SVG string; every text is escaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use agentic_engine::TopologyNode;

use crate::escape::{html as esc, truncate};
use crate::model::Annotations;

const MARGIN: f64 = 24.0;
const ROW: f64 = 62.0;
const NODE_H: f64 = 44.0;
const GAP_X: f64 = 56.0;
const KEY_H: f64 = 24.0;
const KEY_GAP: f64 = 32.0;
const KEYS_GAP_X: f64 = 120.0;

struct Placed<'a> {
    node: &'a TopologyNode,
    depth: usize,
    y: f64,
    parent: Option<usize>,
}

fn place<'a>(
    node: &'a TopologyNode,
    depth: usize,
    parent: Option<usize>,
    row: &mut usize,
    out: &mut Vec<Placed<'a>>,
) -> f64 {
    let idx = out.len();
    out.push(Placed { node, depth, y: 0.0, parent });
    let y = if node.children.is_empty() {
        let y = MARGIN + *row as f64 * ROW + NODE_H / 2.0;
        *row += 1;
        y
    } else {
        let ys: Vec<f64> = node.children.iter().map(|c| place(c, depth + 1, Some(idx), row, out)).collect();
        let first = ys.first().copied().unwrap_or(0.0);
        let last = ys.last().copied().unwrap_or(first);
        (first + last) / 2.0
    };
    out[idx].y = y;
    y
}

/// The colour family of an agent kind (a CSS class).
pub(crate) fn kind_class(kind: &str, composite: bool) -> &'static str {
    match kind {
        _ if composite => "k-composite",
        "llm" | "supervisor" | "decision_router" => "k-llm",
        "human" => "k-human",
        "compute" | "expression" | "template" => "k-compute",
        "mcp" | "a2a" => "k-remote",
        _ => "k-code",
    }
}

fn text_width(text: &str, px: f64) -> f64 {
    text.chars().count() as f64 * px * 0.6
}

struct Key {
    producers: Vec<usize>,
    consumers: Vec<usize>,
    y: f64,
}

/// The SVG of a topology, annotated with a run's invocation counts, failures and pending agents.
pub(crate) fn svg(root: &TopologyNode, ann: &Annotations) -> String {
    let mut placed = Vec::new();
    let mut rows = 0usize;
    place(root, 0, None, &mut rows, &mut placed);

    let node_w = placed
        .iter()
        .map(|p| text_width(&p.node.spec.name, 13.0).max(text_width(&p.node.spec.kind, 11.0) + 46.0) + 30.0)
        .fold(132.0f64, f64::max)
        .min(230.0);
    let max_chars = ((node_w - 26.0) / (13.0 * 0.6)) as usize;
    let max_depth = placed.iter().map(|p| p.depth).max().unwrap_or(0);
    let x_of = |depth: usize| MARGIN + depth as f64 * (node_w + GAP_X);

    // Keys and their producers and consumers.
    let mut keys: BTreeMap<&str, Key> = BTreeMap::new();
    for (i, p) in placed.iter().enumerate() {
        if let Some(k) = &p.node.spec.output_key {
            keys.entry(k.as_str())
                .or_insert_with(|| Key { producers: vec![], consumers: vec![], y: 0.0 })
                .producers
                .push(i);
        }
        for input in &p.node.spec.inputs {
            let key =
                keys.entry(input.key.as_str()).or_insert_with(|| Key { producers: vec![], consumers: vec![], y: 0.0 });
            if !key.consumers.contains(&i) {
                key.consumers.push(i);
            }
        }
    }
    let mut order: Vec<(&str, f64)> = keys
        .iter()
        .map(|(k, v)| {
            let ys: Vec<f64> = v.producers.iter().chain(&v.consumers).map(|&i| placed[i].y).collect();
            (*k, ys.iter().sum::<f64>() / ys.len().max(1) as f64)
        })
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
    let mut prev = f64::NEG_INFINITY;
    for (k, desired) in &order {
        let y = desired.max(prev + KEY_GAP).max(MARGIN + KEY_H / 2.0);
        prev = y;
        if let Some(key) = keys.get_mut(k) {
            key.y = y;
        }
    }
    let key_w = keys.keys().map(|k| text_width(k, 12.0) + 24.0).fold(60.0f64, f64::max).min(260.0);
    let key_chars = ((key_w - 20.0) / (12.0 * 0.6)) as usize;
    let keys_x = x_of(max_depth) + node_w + KEYS_GAP_X;
    let width = if keys.is_empty() { x_of(max_depth) + node_w + MARGIN } else { keys_x + key_w + MARGIN };
    let tree_h = MARGIN * 2.0 + rows as f64 * ROW - (ROW - NODE_H);
    let height = tree_h.max(prev + KEY_H / 2.0 + MARGIN);

    let mut s = String::with_capacity(4_096 + placed.len() * 600);
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="topology" id="topology-svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="Agent topology">"#
    );
    s.push_str(concat!(
        r#"<defs><marker id="arrow-out" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrow-out"/></marker>"#,
        r#"<marker id="arrow-in" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrow-in"/></marker></defs>"#
    ));

    // Tree edges.
    s.push_str(r#"<g class="tree-edges">"#);
    for p in &placed {
        if let Some(parent) = p.parent {
            let pp = &placed[parent];
            let (x1, y1) = (x_of(pp.depth) + node_w, pp.y);
            let (x2, y2) = (x_of(p.depth), p.y);
            let mx = x1 + GAP_X / 2.0;
            let _ = write!(s, r#"<path d="M{x1:.1},{y1:.1} H{mx:.1} V{y2:.1} H{x2:.1}"/>"#);
        }
    }
    s.push_str("</g>");

    // Data-flow edges (under the nodes).
    s.push_str(r#"<g class="flow-edges">"#);
    for (ki, (k, key)) in keys.iter().enumerate() {
        let _ = k;
        for &i in &key.producers {
            let p = &placed[i];
            let (x1, y1) = (x_of(p.depth) + node_w, p.y - 6.0);
            let (x2, y2) = (keys_x, key.y);
            let d = ((x2 - x1) / 2.0).max(40.0);
            let _ = write!(
                s,
                r#"<path class="flow-out" data-n="{i}" data-k="{ki}" d="M{x1:.1},{y1:.1} C{:.1},{y1:.1} {:.1},{y2:.1} {x2:.1},{y2:.1}" marker-end="url(#arrow-out)"/>"#,
                x1 + d,
                x2 - d
            );
        }
        for &i in &key.consumers {
            let p = &placed[i];
            let (x1, y1) = (keys_x, key.y);
            let (x2, y2) = (x_of(p.depth) + node_w + 2.0, p.y + 6.0);
            let d = ((x1 - x2) / 2.0).max(40.0);
            let _ = write!(
                s,
                r#"<path class="flow-in" data-n="{i}" data-k="{ki}" d="M{x1:.1},{y1:.1} C{:.1},{y1:.1} {:.1},{y2:.1} {x2:.1},{y2:.1}" marker-end="url(#arrow-in)"/>"#,
                x1 - d,
                x2 + d
            );
        }
    }
    s.push_str("</g>");

    // Agent nodes.
    s.push_str(r#"<g class="nodes">"#);
    for (i, p) in placed.iter().enumerate() {
        let n = p.node;
        let composite = !n.children.is_empty();
        let (x, y) = (x_of(p.depth), p.y - NODE_H / 2.0);
        let count = ann.counts.get(&n.path).copied().unwrap_or(0);
        let mut classes = vec!["node", kind_class(&n.spec.kind, composite)];
        if ann.failed.contains(&n.path) {
            classes.push("st-failed");
        } else if ann.pending.contains(&n.path) {
            classes.push("st-pending");
        } else if count > 0 {
            classes.push("st-ran");
        }
        let mut tip = format!("{} ({})\npath: {}", n.spec.name, n.spec.kind, n.path);
        if !n.spec.description.is_empty() {
            let _ = write!(tip, "\n{}", n.spec.description);
        }
        if !n.spec.inputs.is_empty() {
            let keys: Vec<&str> = n.spec.inputs.iter().map(|i| i.key.as_str()).collect();
            let _ = write!(tip, "\ninputs: {}", keys.join(", "));
        }
        if let Some(k) = &n.spec.output_key {
            let _ = write!(tip, "\noutput: {k}");
        }
        if count > 0 {
            let _ = write!(tip, "\ninvocations: {count}");
        }
        let _ = write!(
            s,
            r#"<g class="{}" data-n="{i}" data-path="{}"><title>{}</title><rect x="{x:.1}" y="{y:.1}" width="{node_w:.1}" height="{NODE_H}" rx="7"/><rect class="stripe" x="{x:.1}" y="{y:.1}" width="5" height="{NODE_H}" rx="2"/>"#,
            classes.join(" "),
            esc(&n.path),
            esc(&tip)
        );
        let _ = write!(
            s,
            r#"<text class="name" x="{:.1}" y="{:.1}">{}</text>"#,
            x + 14.0,
            y + 19.0,
            esc(&truncate(&n.spec.name, max_chars))
        );
        let mut sub = n.spec.kind.clone();
        if n.spec.is_async {
            sub.push_str(" · async");
        }
        if n.spec.optional {
            sub.push_str(" · optional");
        }
        let _ = write!(
            s,
            r#"<text class="kind" x="{:.1}" y="{:.1}">{}</text>"#,
            x + 14.0,
            y + 35.0,
            esc(&truncate(&sub, max_chars + 2))
        );
        if count > 0 {
            let label = format!("×{count}");
            let bw = text_width(&label, 10.5) + 10.0;
            let _ = write!(
                s,
                r#"<g class="badge"><rect x="{:.1}" y="{:.1}" width="{bw:.1}" height="16" rx="8"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                x + node_w - bw - 6.0,
                y + 24.0,
                x + node_w - bw / 2.0 - 6.0,
                y + 35.5,
                esc(&label)
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</g>");

    // Key nodes.
    let root_out = root.spec.output_key.as_deref();
    s.push_str(r#"<g class="keys">"#);
    for (ki, (k, key)) in keys.iter().enumerate() {
        let class = if key.producers.is_empty() {
            "key key-input"
        } else if Some(*k) == root_out || key.consumers.is_empty() {
            "key key-output"
        } else {
            "key"
        };
        let tip = format!(
            "key `{k}`\nwritten by: {}\nread by: {}",
            names(&placed, &key.producers, "— (run input)"),
            names(&placed, &key.consumers, "—")
        );
        let _ = write!(
            s,
            r#"<g class="{class}" data-k="{ki}"><title>{}</title><rect x="{keys_x:.1}" y="{:.1}" width="{key_w:.1}" height="{KEY_H}" rx="12"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
            esc(&tip),
            key.y - KEY_H / 2.0,
            keys_x + 12.0,
            key.y + 4.0,
            esc(&truncate(k, key_chars))
        );
    }
    s.push_str("</g></svg>");
    s
}

fn names(placed: &[Placed<'_>], idx: &[usize], none: &str) -> String {
    if idx.is_empty() {
        return none.to_string();
    }
    idx.iter().map(|&i| placed[i].node.spec.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// Counts of the topology for the page header: agents, composites, keys.
pub(crate) fn counts(root: &TopologyNode) -> (usize, usize, usize) {
    let nodes = root.walk();
    let composites = nodes.iter().filter(|n| !n.children.is_empty()).count();
    let mut keys: Vec<&str> = Vec::new();
    for n in &nodes {
        keys.extend(n.spec.output_key.as_deref());
        keys.extend(n.spec.inputs.iter().map(|i| i.key.as_str()));
    }
    keys.sort_unstable();
    keys.dedup();
    (nodes.len(), composites, keys.len())
}
