//! From the located tree to the typed model: field names, types, kinds and duplicate keys are checked here,
//! every problem recorded (parsing continues past errors wherever the rest can still be read).

use agentic_engine::Effect;
use serde_json::Value;

use crate::error::{Sink, suggest};
use crate::kind::{FieldType, KindField, KindRef};
use crate::model::{
    A2aDef, AgentDef, AgentKind, ApproveDef, CompositeCommon, ComputeBody, DeadlineDef, EntryDef, ErrorHandlerDef,
    FieldValue, Located, McpDef, McpServerDef, McpServerEntry, McpToolsDef, ModelDef, ModelField, ModelProvider,
    OnTimeoutDef, PlannerDef, SUPPORTED_KINDS, UNSUPPORTED_KINDS, WaitDef,
};
use crate::node::{Node, NodeValue, Pos};
use crate::params::{ParamDef, ParamType};

/// Fields every agent takes.
pub(crate) const COMMON_FIELDS: &[&str] =
    &["kind", "description", "inputs", "output_key", "optional", "async", "timeout_ms", "budget"];
/// Fields every composite takes besides the common ones.
pub(crate) const COMPOSITE_FIELDS: &[&str] = &["output", "error_handler", "compensate_on_error"];
const TOP_FIELDS: &[&str] =
    &["version", "name", "root", "params", "budget", "models", "mcp_servers", "agents", "evals"];

/// The top level of a spec, parsed (not yet cross-checked).
pub(crate) struct Parsed {
    pub(crate) version: Option<Located<i64>>,
    pub(crate) name: Option<String>,
    pub(crate) root: Option<Located<String>>,
    pub(crate) params: Vec<ParamDef>,
    pub(crate) models: Vec<ModelDef>,
    pub(crate) mcp_servers: Vec<McpServerEntry>,
    /// Every MCP server name declared (including entries with errors), for reference checks.
    pub(crate) mcp_server_names: Vec<String>,
    pub(crate) agents: Vec<AgentDef>,
    /// Every agent name defined (including agents whose definition has errors), for reference checks.
    pub(crate) names: Vec<String>,
    /// Position of the top-level mapping.
    pub(crate) pos: Pos,
    /// The top-level `budget`: the root agent's.
    pub(crate) budget: Option<Located<agentic_engine::budget::Budget>>,
    /// The top-level `evals` (SPEC.md §6), as written: `agentic eval` reads them (crate `agentic-eval`).
    pub(crate) evals: Vec<crate::evals::EvalEntry>,
}

/// A mapping's entries after the duplicate check (first occurrence kept), in document order.
struct Obj<'a> {
    pos: Pos,
    entries: Vec<(String, Pos, &'a Node)>,
}

impl<'a> Obj<'a> {
    fn get(&self, field: &str) -> Option<&'a Node> {
        self.entries.iter().find(|(k, _, _)| k == field).map(|(_, _, v)| *v)
    }

    /// Reports every field not in `allowed` (with a suggestion and the list of valid fields).
    /// Fields suggested for misspelt ones are remembered in `cx` so that a "missing field" error is not
    /// reported on top of the misspelling.
    fn check_fields(&self, allowed: &[&str], cx: &mut Cx<'_>) {
        cx.suggested.clear();
        for (key, pos, _) in &self.entries {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let hint = match suggest(key, allowed.iter().copied()) {
                Some(s) => {
                    cx.suggested.push(s.to_string());
                    format!(" (did you mean `{s}`?)")
                }
                None => String::new(),
            };
            let list = allowed.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
            cx.err(*pos, None, format!("unknown field `{key}`{hint}, expected one of {list}"));
        }
    }
}

/// Error context: the sink and the agent (or model) being read.
struct Cx<'s> {
    sink: &'s mut Sink,
    agent: Option<String>,
    /// Fields suggested for the misspelt fields of the object being read.
    suggested: Vec<String>,
}

impl Cx<'_> {
    fn err(&mut self, pos: Pos, field: Option<&str>, message: impl Into<String>) {
        self.sink.push(pos, self.agent.as_deref(), field, message);
    }

    /// `node` as a mapping; duplicate keys reported (`what` names the keys: `field`, `agent name`, ...).
    fn obj<'a>(&mut self, node: &'a Node, field: Option<&str>, what: &str) -> Option<Obj<'a>> {
        let NodeValue::Map(entries) = &node.value else {
            self.err(node.pos, field, format!("expected a mapping, found {}", node.type_name()));
            return None;
        };
        let mut out: Vec<(String, Pos, &Node)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let key = k.key_text();
            if let Some((_, first, _)) = out.iter().find(|(name, _, _)| *name == key) {
                let msg =
                    format!("duplicate {what} `{key}` (first defined at line {}, column {})", first.line, first.column);
                self.err(k.pos, None, msg);
                continue;
            }
            out.push((key, k.pos, v));
        }
        Some(Obj { pos: node.pos, entries: out })
    }

    fn string(&mut self, obj: &Obj<'_>, field: &str) -> Option<Located<String>> {
        let node = obj.get(field)?;
        match &node.value {
            NodeValue::Str(s) => Some(Located::new(s.clone(), node.pos)),
            _ => {
                self.err(node.pos, Some(field), format!("expected a string, found {}", node.type_name()));
                None
            }
        }
    }

    /// A non-empty string (keys, names, expressions).
    fn nonempty(&mut self, obj: &Obj<'_>, field: &str) -> Option<Located<String>> {
        let s = self.string(obj, field)?;
        if s.value.trim().is_empty() {
            self.err(s.pos, Some(field), "must not be empty");
            return None;
        }
        Some(s)
    }

    /// Reports a missing field, unless a misspelling of it was already reported.
    fn missing(&mut self, pos: Pos, field: &str, message: impl Into<String>) {
        if !self.suggested.iter().any(|s| s == field) {
            self.err(pos, None, message);
        }
    }

    fn required(&mut self, obj: &Obj<'_>, field: &str) -> Option<Located<String>> {
        if obj.get(field).is_none() {
            self.missing(obj.pos, field, format!("missing field `{field}`"));
            return None;
        }
        self.nonempty(obj, field)
    }

    fn boolean(&mut self, obj: &Obj<'_>, field: &str) -> bool {
        let Some(node) = obj.get(field) else { return false };
        match node.value {
            NodeValue::Bool(b) => b,
            _ => {
                self.err(node.pos, Some(field), format!("expected true or false, found {}", node.type_name()));
                false
            }
        }
    }

    /// An integer in `min..=max`.
    fn int(&mut self, obj: &Obj<'_>, field: &str, min: u64, max: u64) -> Option<u64> {
        let node = obj.get(field)?;
        let value = match node.value {
            NodeValue::UInt(u) => Some(u),
            NodeValue::Int(i) => u64::try_from(i).ok(),
            _ => {
                self.err(node.pos, Some(field), format!("expected an integer, found {}", node.type_name()));
                return None;
            }
        };
        match value {
            Some(v) if (min..=max).contains(&v) => Some(v),
            _ => {
                let shown = node.to_json();
                let range = if max >= u64::from(u32::MAX) {
                    format!("at least {min}")
                } else {
                    format!("between {min} and {max}")
                };
                self.err(node.pos, Some(field), format!("must be {range}, found {shown}"));
                None
            }
        }
    }

    fn number(&mut self, obj: &Obj<'_>, field: &str) -> Option<f64> {
        let node = obj.get(field)?;
        match node.value {
            NodeValue::Float(f) => Some(f),
            NodeValue::Int(i) => Some(i as f64),
            NodeValue::UInt(u) => Some(u as f64),
            _ => {
                self.err(node.pos, Some(field), format!("expected a number, found {}", node.type_name()));
                None
            }
        }
    }

    /// A list of non-empty strings.
    fn string_list(&mut self, obj: &Obj<'_>, field: &str) -> Option<Vec<Located<String>>> {
        let node = obj.get(field)?;
        let NodeValue::Seq(items) = &node.value else {
            self.err(node.pos, Some(field), format!("expected a list of names, found {}", node.type_name()));
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item.as_str() {
                Some(s) if !s.trim().is_empty() => out.push(Located::new(s.to_string(), item.pos)),
                Some(_) => self.err(item.pos, Some(field), "names must not be empty"),
                None => self.err(item.pos, Some(field), format!("expected a name, found {}", item.type_name())),
            }
        }
        Some(out)
    }
}

/// Parses the tree of a whole spec.
pub(crate) fn parse_tree(tree: &Node, sink: &mut Sink) -> Parsed {
    let mut cx = Cx { sink, agent: None, suggested: Vec::new() };
    let mut parsed = Parsed {
        version: None,
        name: None,
        root: None,
        params: Vec::new(),
        models: Vec::new(),
        mcp_servers: Vec::new(),
        mcp_server_names: Vec::new(),
        agents: Vec::new(),
        names: Vec::new(),
        pos: tree.pos,
        budget: None,
        evals: Vec::new(),
    };
    if matches!(tree.value, NodeValue::Null) {
        cx.err(Pos::new(1, 1), None, "the spec is empty (expected `version`, `root` and `agents`)");
        return parsed;
    }
    let Some(top) = cx.obj(tree, None, "field") else { return parsed };
    top.check_fields(TOP_FIELDS, &mut cx);

    match top.get("version") {
        None => cx.err(top.pos, None, "missing field `version` (expected `version: 1`)"),
        Some(node) => match node.value {
            NodeValue::UInt(1) | NodeValue::Int(1) => parsed.version = Some(Located::new(1, node.pos)),
            _ => cx.err(node.pos, Some("version"), format!("unsupported version {}, expected 1", node.to_json())),
        },
    }
    parsed.name = cx.nonempty(&top, "name").map(|n| n.value);
    parsed.root = match top.get("root") {
        None => {
            cx.err(top.pos, None, "missing field `root` (the agent `agentic run` invokes)");
            None
        }
        Some(_) => cx.nonempty(&top, "root"),
    };
    if let Some(params) = top.get("params")
        && !matches!(params.value, NodeValue::Null)
    {
        let before = cx.sink_len();
        parsed.params = parse_params(params, &mut cx);
        cx.nest_since(before, "params");
    }
    parsed.budget = top.get("budget").and_then(|node| parse_budget(node, &mut cx));
    if let Some(evals) = top.get("evals") {
        parsed.evals = crate::evals::parse_entries(evals, cx.sink);
    }
    if let Some(models) = top.get("models")
        && !matches!(models.value, NodeValue::Null)
        && let Some(obj) = cx.obj(models, Some("models"), "model name")
    {
        for (name, pos, node) in &obj.entries {
            if let Some(m) = parse_model(name, *pos, node, cx.sink) {
                parsed.models.push(m);
            }
        }
    }
    if let Some(servers) = top.get("mcp_servers")
        && !matches!(servers.value, NodeValue::Null)
        && let Some(obj) = cx.obj(servers, Some("mcp_servers"), "MCP server name")
    {
        for (name, _, node) in &obj.entries {
            parsed.mcp_server_names.push(name.clone());
            if let Some(server) = parse_mcp_server(node, &mut cx, &format!("mcp_servers.{name}")) {
                parsed.mcp_servers.push(McpServerEntry { name: name.clone(), server });
            }
        }
    }
    match top.get("agents") {
        None => cx.err(top.pos, None, "missing field `agents`"),
        Some(agents) => {
            if let Some(obj) = cx.obj(agents, Some("agents"), "agent name") {
                if obj.entries.is_empty() {
                    cx.err(agents.pos, Some("agents"), "no agents defined");
                }
                for (name, pos, node) in &obj.entries {
                    parsed.names.push(name.clone());
                    if let Some(a) = parse_agent(name, *pos, node, cx.sink) {
                        parsed.agents.push(a);
                    }
                }
            }
        }
    }
    // Without prices a model's cost is not counted: a `cost_usd` budget could never be reached.
    let unpriced: Vec<String> =
        parsed.models.iter().filter(|m| m.prices.is_none()).map(|m| format!("`{}`", m.name)).collect();
    let cost_budgets = parsed
        .budget
        .iter()
        .map(|b| (None, b))
        .chain(parsed.agents.iter().filter_map(|a| a.budget.as_ref().map(|b| (Some(a.name.as_str()), b))));
    if !unpriced.is_empty() {
        for (agent, b) in cost_budgets.filter(|(_, b)| b.value.cost_usd.is_some()) {
            let message = format!(
                "a `cost_usd` budget needs `prices` on the models: {} {} none",
                unpriced.join(", "),
                if unpriced.len() == 1 { "has" } else { "have" }
            );
            cx.sink.push(b.pos, agent, Some("budget"), message);
        }
    }
    if let (Some(budget), Some(root)) = (parsed.budget.take(), parsed.root.as_ref()) {
        match parsed.agents.iter_mut().find(|a| a.name == root.value) {
            Some(a) if a.budget.is_some() => cx.err(
                budget.pos,
                Some("budget"),
                format!("the run's `budget` is the root agent's, and `{}` has its own: give one of them", root.value),
            ),
            Some(a) => a.budget = Some(budget),
            None => {}
        }
    }
    parsed
}

/// `budget: {tokens, model_calls, cost_usd, on_exceed}` (SPEC.md §3).
fn parse_budget(node: &Node, cx: &mut Cx<'_>) -> Option<Located<agentic_engine::budget::Budget>> {
    use agentic_engine::budget::{Budget, OnExceed};
    let before = cx.sink_len();
    let budget = (|| {
        let obj = cx.obj(node, None, "field")?;
        obj.check_fields(&["tokens", "model_calls", "cost_usd", "on_exceed"], cx);
        let mut b = Budget {
            tokens: cx.int(&obj, "tokens", 1, u64::MAX),
            model_calls: cx.int(&obj, "model_calls", 1, u64::MAX),
            cost_usd: cx.number(&obj, "cost_usd"),
            ..Budget::default()
        };
        if let Some(c) = b.cost_usd.filter(|c| !(*c > 0.0 && c.is_finite()))
            && let Some(n) = obj.get("cost_usd")
        {
            cx.err(n.pos, Some("cost_usd"), format!("expected a number of USD above 0, found {c}"));
        }
        if let Some(n) = obj.get("on_exceed") {
            match n.as_str() {
                Some("suspend") => b.on_exceed = OnExceed::Suspend,
                Some("fail") => b.on_exceed = OnExceed::Fail,
                _ => cx.err(
                    n.pos,
                    Some("on_exceed"),
                    format!("unknown `on_exceed` {}, expected `suspend` or `fail`", n.to_json()),
                ),
            }
        }
        if b.tokens.is_none() && b.model_calls.is_none() && b.cost_usd.is_none() && cx.sink_len() == before {
            cx.err(obj.pos, None, "a budget needs at least one of `tokens`, `model_calls`, `cost_usd`");
        }
        Some(Located::new(b, node.pos))
    })();
    cx.nest_since(before, "budget");
    budget
}

/// `prices: {input_per_mtok, output_per_mtok}` and `limits: {requests_per_minute, tokens_per_minute,
/// max_concurrency}` of a model entry (SPEC.md §3).
fn parse_model_extras(
    obj: &Obj<'_>,
    cx: &mut Cx<'_>,
) -> (Option<agentic_engine::budget::Prices>, agentic_engine::limits::ModelLimits) {
    use agentic_engine::budget::Prices;
    use agentic_engine::limits::ModelLimits;
    let mut prices = None;
    if let Some(node) = obj.get("prices") {
        let before = cx.sink_len();
        if let Some(p) = cx.obj(node, None, "field") {
            p.check_fields(&["input_per_mtok", "output_per_mtok"], cx);
            let input = cx.number(&p, "input_per_mtok");
            let output = cx.number(&p, "output_per_mtok");
            for (field, v) in [("input_per_mtok", input), ("output_per_mtok", output)] {
                if let Some(v) = v.filter(|v| *v < 0.0 || !v.is_finite())
                    && let Some(n) = p.get(field)
                {
                    cx.err(n.pos, Some(field), format!("expected USD per million tokens, at least 0, found {v}"));
                }
            }
            match (input, output) {
                (Some(i), Some(o)) => prices = Some(Prices { input_per_mtok: i, output_per_mtok: o }),
                _ if cx.sink_len() > before => {}
                _ => cx.err(p.pos, None, "`prices` needs both `input_per_mtok` and `output_per_mtok`"),
            }
        }
        cx.nest_since(before, "prices");
    }
    let mut limits = ModelLimits::default();
    if let Some(node) = obj.get("limits") {
        let before = cx.sink_len();
        if let Some(l) = cx.obj(node, None, "field") {
            l.check_fields(&["requests_per_minute", "tokens_per_minute", "max_concurrency"], cx);
            limits.requests_per_minute =
                cx.int(&l, "requests_per_minute", 1, u64::from(u32::MAX)).and_then(|v| u32::try_from(v).ok());
            limits.tokens_per_minute = cx.int(&l, "tokens_per_minute", 1, u64::MAX);
            limits.max_concurrency =
                cx.int(&l, "max_concurrency", 1, u64::from(u32::MAX)).and_then(|v| u32::try_from(v).ok());
            if limits.is_empty() && cx.sink_len() == before {
                cx.err(
                    l.pos,
                    None,
                    "`limits` needs at least one of `requests_per_minute`, `tokens_per_minute`, `max_concurrency`",
                );
            }
        }
        cx.nest_since(before, "limits");
    }
    (prices, limits)
}

/// An MCP server at `field` (an agent's `server`, `mcp_servers.<name>`): `{command: [program, args..]}` or
/// `{url: http(s)://..}`.
fn parse_mcp_server(node: &Node, cx: &mut Cx<'_>, field: &str) -> Option<Located<McpServerDef>> {
    let obj = cx.obj(node, Some(field), "field")?;
    let before = cx.sink_len();
    obj.check_fields(&["command", "url", "env", "headers"], cx);
    cx.nest_since(before, field);
    let sub = |name: &str| format!("{field}.{name}");
    match (obj.get("command"), obj.get("url")) {
        (Some(c), None) => {
            let NodeValue::Seq(items) = &c.value else {
                cx.err(
                    c.pos,
                    Some(&sub("command")),
                    format!("expected a list (program, then arguments), found {}", c.type_name()),
                );
                return None;
            };
            let mut command = Vec::with_capacity(items.len());
            for item in items {
                match &item.value {
                    NodeValue::Str(s) => command.push(s.clone()),
                    NodeValue::Int(_) | NodeValue::UInt(_) | NodeValue::Float(_) | NodeValue::Bool(_) => {
                        command.push(item.to_json().to_string())
                    }
                    _ => {
                        cx.err(
                            item.pos,
                            Some(&sub("command")),
                            format!("expected a string, found {}", item.type_name()),
                        );
                        return None;
                    }
                }
            }
            if command.first().is_none_or(|p| p.trim().is_empty()) {
                cx.err(c.pos, Some(&sub("command")), "must name a program");
                return None;
            }
            if let Some(h) = obj.get("headers") {
                cx.err(h.pos, Some(&sub("headers")), "a stdio server (`command`) takes `env`, not HTTP `headers`");
                return None;
            }
            let env = string_map(&obj, "env", &sub("env"), cx)?;
            Some(Located::new(McpServerDef::Stdio { command, env }, node.pos))
        }
        (None, Some(_)) => {
            let url = cx.nonempty(&obj, "url")?;
            if !(url.value.starts_with("http://") || url.value.starts_with("https://")) {
                cx.err(
                    url.pos,
                    Some(&sub("url")),
                    format!("expected an http:// or https:// URL, found `{}`", url.value),
                );
                return None;
            }
            if let Some(e) = obj.get("env") {
                cx.err(e.pos, Some(&sub("env")), "an HTTP server (`url`) takes `headers`, not a process's `env`");
                return None;
            }
            let headers = string_map(&obj, "headers", &sub("headers"), cx)?;
            Some(Located::new(McpServerDef::Http { url: url.value, headers }, node.pos))
        }
        (Some(_), Some(u)) => {
            cx.err(u.pos, Some(field), "give either `command` (stdio) or `url` (streamable HTTP), not both");
            None
        }
        (None, None) => {
            if !cx.suggested.iter().any(|f| f == "command" || f == "url") {
                cx.err(
                    node.pos,
                    Some(field),
                    "expected `command: [program, args..]` (stdio) or `url: ..` (streamable HTTP)",
                );
            }
            None
        }
    }
}

/// A map of names to strings at `obj`'s `key` (an MCP server's `env`, HTTP `headers`): empty when absent; its
/// errors are located at `field.NAME`. A number or a boolean is taken as its text.
fn string_map(obj: &Obj<'_>, key: &str, field: &str, cx: &mut Cx<'_>) -> Option<Vec<(String, Located<String>)>> {
    let Some(node) = obj.get(key) else { return Some(Vec::new()) };
    let map = cx.obj(node, Some(field), "name")?;
    let mut out = Vec::with_capacity(map.entries.len());
    for (name, _, value) in &map.entries {
        let text = match &value.value {
            NodeValue::Str(s) => s.clone(),
            NodeValue::Int(_) | NodeValue::UInt(_) | NodeValue::Float(_) | NodeValue::Bool(_) => {
                value.to_json().to_string()
            }
            _ => {
                let msg = format!("expected a string, found {}", value.type_name());
                cx.err(value.pos, Some(&format!("{field}.{name}")), msg);
                return None;
            }
        };
        out.push((name.clone(), Located::new(text, value.pos)));
    }
    Some(out)
}

/// `params: {name: TYPE | {type: TYPE, default: VALUE, description: TEXT}}`: the root's declared inputs.
/// Errors name the field under `params` (`temperature`, `temperature.default`).
fn parse_params(node: &Node, cx: &mut Cx<'_>) -> Vec<ParamDef> {
    let Some(obj) = cx.obj(node, None, "parameter") else { return Vec::new() };
    let mut out = Vec::with_capacity(obj.entries.len());
    for (name, pos, value) in &obj.entries {
        if name.trim().is_empty() {
            cx.err(*pos, None, "parameter names must not be empty");
            continue;
        }
        let before = cx.sink_len();
        let param = parse_param(name, *pos, value, cx);
        cx.nest_since(before, name);
        out.extend(param);
    }
    out
}

/// One entry of `params` (errors recorded without the parameter's name: the caller nests them under it).
fn parse_param(name: &str, pos: Pos, value: &Node, cx: &mut Cx<'_>) -> Option<ParamDef> {
    let param = |ty, default, description| ParamDef { name: name.to_string(), pos, ty, default, description };
    match &value.value {
        NodeValue::Str(_) => param_type(value, None, cx).map(|ty| param(ty, None, None)),
        NodeValue::Map(_) => {
            let fields = cx.obj(value, None, "field")?;
            fields.check_fields(&["type", "default", "description"], cx);
            let description = fields.get("description").and_then(|d| match &d.value {
                NodeValue::Str(s) => Some(s.clone()),
                _ => {
                    cx.err(d.pos, Some("description"), format!("expected a string, found {}", d.type_name()));
                    None
                }
            });
            let Some(t) = fields.get("type") else {
                cx.missing(value.pos, "type", format!("missing field `type` (one of {})", ParamType::names_list()));
                return None;
            };
            let ty = param_type(t, Some("type"), cx)?;
            let default = match fields.get("default") {
                Some(d) if !ty.accepts(&d.to_json()) => {
                    cx.err(d.pos, Some("default"), format!("expected {}, found {}", ty.described(), d.type_name()));
                    return None;
                }
                other => other.map(Node::to_json),
            };
            Some(param(ty, default, description))
        }
        _ => {
            let msg = format!(
                "expected a type name ({}) or `{{type, default, description}}`, found {}",
                ParamType::names_list(),
                value.type_name()
            );
            cx.err(value.pos, None, msg);
            None
        }
    }
}

/// A parameter's type name (`number`), with a located error (about `field`) when it is not one.
fn param_type(node: &Node, field: Option<&str>, cx: &mut Cx<'_>) -> Option<ParamType> {
    let Some(name) = node.as_str() else {
        cx.err(node.pos, field, format!("expected a type name, found {}", node.type_name()));
        return None;
    };
    if let Some(ty) = ParamType::from_name(name) {
        return Some(ty);
    }
    let hint = match suggest(name, ParamType::ALL.iter().map(|t| t.name())) {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => String::new(),
    };
    cx.err(node.pos, field, format!("unknown type `{name}`{hint}, expected one of {}", ParamType::names_list()));
    None
}

fn parse_model(name: &str, pos: Pos, node: &Node, sink: &mut Sink) -> Option<ModelDef> {
    let mut cx = Cx { sink, agent: None, suggested: Vec::new() };
    let before = cx.sink_len();
    let model = parse_model_fields(name, pos, node, &mut cx);
    cx.nest_since(before, &format!("models.{name}"));
    model
}

fn parse_model_fields(name: &str, pos: Pos, node: &Node, cx: &mut Cx<'_>) -> Option<ModelDef> {
    let obj = cx.obj(node, None, "field")?;
    let Some(provider) = obj.get("provider") else {
        cx.err(pos, None, "missing field `provider` (one of `openai`, `local`, `scripted`)");
        return None;
    };
    let Some(provider_name) = provider.as_str() else {
        cx.err(provider.pos, Some("provider"), format!("expected a string, found {}", provider.type_name()));
        return None;
    };
    let allowed: &[&str] = match provider_name {
        "openai" => &[
            "provider",
            "base_url",
            "model",
            "api_key",
            "api_key_env",
            "temperature",
            "max_tokens",
            "prices",
            "limits",
        ],
        "local" => &["provider", "model_path", "prices", "limits"],
        "scripted" => &["provider", "replies", "decisions", "prices", "limits"],
        other => {
            let hint = match suggest(other, ["openai", "local", "scripted"]) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            cx.err(
                provider.pos,
                None,
                format!("unknown provider `{other}`{hint}, expected one of `openai`, `local`, `scripted`"),
            );
            return None;
        }
    };
    obj.check_fields(allowed, cx);
    let (prices, limits) = parse_model_extras(&obj, cx);
    let provider = match provider_name {
        "openai" => ModelProvider::OpenAi {
            base_url: cx.nonempty(&obj, "base_url").map(|s| s.value),
            model: cx.nonempty(&obj, "model").map(|s| s.value),
            api_key_env: cx.nonempty(&obj, "api_key_env").map(|s| s.value),
            api_key: parse_api_key(&obj, cx),
            temperature: cx.number(&obj, "temperature"),
            max_tokens: cx.int(&obj, "max_tokens", 1, u64::from(u32::MAX)).and_then(|v| u32::try_from(v).ok()),
        },
        "local" => ModelProvider::Local { model_path: cx.nonempty(&obj, "model_path").map(|s| s.value) },
        _ => {
            let replies = scripted_list(&obj, "replies", cx)
                .into_iter()
                .map(|n| match &n.value {
                    NodeValue::Str(s) => s.clone(),
                    _ => n.to_json().to_string(),
                })
                .collect();
            let decisions = scripted_list(&obj, "decisions", cx).into_iter().map(Node::to_json).collect();
            ModelProvider::Scripted { replies, decisions }
        }
    };
    Some(ModelDef { name: name.to_string(), pos, provider, prices, limits })
}

/// An `openai` model's `api_key`: a secret's reference and nothing else, so that no key is written in a spec
/// the store archives with every run.
fn parse_api_key(obj: &Obj<'_>, cx: &mut Cx<'_>) -> Option<String> {
    let key = cx.nonempty(obj, "api_key")?;
    let names = crate::secret_references(&key.value);
    if names.len() == 1 && key.value.trim() == format!("${{secret:{}}}", names[0]) {
        return Some(key.value.trim().to_string());
    }
    cx.err(
        key.pos,
        Some("api_key"),
        "expected a secret's reference, `${secret:NAME}` (the value is given with --secrets FILE or \
         AGENTIC_SECRET_NAME): a key written in the spec would be archived with every run",
    );
    None
}

fn scripted_list<'a>(obj: &Obj<'a>, field: &str, cx: &mut Cx<'_>) -> Vec<&'a Node> {
    match obj.get(field) {
        None => Vec::new(),
        Some(Node { value: NodeValue::Seq(items), .. }) => items.iter().collect(),
        Some(node) => {
            cx.err(node.pos, Some(field), format!("expected a list, found {}", node.type_name()));
            Vec::new()
        }
    }
}

impl Cx<'_> {
    fn sink_len(&self) -> usize {
        self.sink.len()
    }

    /// Puts the errors recorded since `from` under field `prefix` (`retry` becomes `error_handler.retry`).
    fn nest_since(&mut self, from: usize, prefix: &str) {
        self.sink.nest_since(from, prefix);
    }
}

/// A `registry` agent: `name` only. The agent was built in Rust with its own fields, so the common fields
/// are refused with that reason (not as unknown fields).
fn parse_registry(name: &str, pos: Pos, kind_pos: Pos, obj: &Obj<'_>, cx: &mut Cx<'_>) -> Option<AgentDef> {
    let own: Vec<&(String, Pos, &Node)> =
        obj.entries.iter().filter(|(k, _, _)| k != "kind" && COMMON_FIELDS.contains(&k.as_str())).collect();
    for (field, field_pos, _) in own {
        cx.err(
            *field_pos,
            None,
            format!(
                "a `registry` agent takes only `name`: `{field}` belongs to the registered agent, which is built \
                 in Rust with its own fields"
            ),
        );
    }
    let rest = Obj {
        pos: obj.pos,
        entries: obj
            .entries
            .iter()
            .filter(|(k, _, _)| k == "kind" || !COMMON_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect(),
    };
    rest.check_fields(&["kind", "name"], cx);
    let registered = cx.required(obj, "name")?;
    Some(bare_agent(name, pos, kind_pos, AgentKind::Registry { name: registered }))
}

fn parse_agent(name: &str, pos: Pos, node: &Node, sink: &mut Sink) -> Option<AgentDef> {
    let mut cx = Cx { sink, agent: Some(name.to_string()), suggested: Vec::new() };
    let obj = cx.obj(node, None, "field")?;
    let Some(kind_node) = obj.get("kind") else {
        cx.err(pos, None, format!("missing field `kind` (one of {})", kinds_list()));
        return None;
    };
    let Some(kind) = kind_node.as_str() else {
        cx.err(kind_node.pos, Some("kind"), format!("expected a string, found {}", kind_node.type_name()));
        return None;
    };
    let kind_pos = kind_node.pos;
    if UNSUPPORTED_KINDS.contains(&kind) {
        cx.err(kind_pos, None, format!("kind `{kind}` is not supported yet by this build"));
        return Some(bare_agent(name, pos, kind_pos, AgentKind::Unsupported(kind.to_string())));
    }
    let described = crate::kind::registered_kind(kind);
    let described_fields: Vec<&str> =
        described.iter().flat_map(|k| k.descriptor().fields().iter().map(|f| f.name)).collect();
    let specific: &[&str] = match kind {
        "compute" => &["value", "template"],
        "human" => &["prompt", "mode", "response_id", "deadline", "on_timeout"],
        "wait" => &["for", "until"],
        "mcp" => &["server", "tool", "effect"],
        "a2a" => &["url", "tenant", "tenant_key", "message", "context_key", "task_key", "stream", "headers"],
        "llm" => &[
            "model",
            "system",
            "user",
            "output",
            "memory",
            "context",
            "tools",
            "max_tool_iterations",
            "tool_choice",
            "temperature",
            "max_tokens",
            "stream",
            "confidence_key",
            "scores_key",
        ],
        "registry" => &["name"],
        _ if described.is_some() => &described_fields,
        other => {
            let registered = crate::kind::registered_kinds();
            let all =
                SUPPORTED_KINDS.iter().chain(UNSUPPORTED_KINDS).copied().chain(registered.iter().map(String::as_str));
            let hint = match suggest(other, all) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            // Not a misspelling: maybe a kind another program registers (it runs such specs itself).
            let elsewhere =
                if hint.is_empty() { " (or a kind that only the program registering it knows)" } else { "" };
            cx.err(
                kind_pos,
                None,
                format!("unknown kind `{other}`{hint}, expected one of {}{elsewhere}", kinds_list()),
            );
            return None;
        }
    };
    if kind == "registry" {
        return parse_registry(name, pos, kind_pos, &obj, &mut cx);
    }
    let is_composite = !matches!(kind, "compute" | "human" | "wait" | "llm" | "mcp" | "a2a");
    let mut allowed: Vec<&str> = COMMON_FIELDS.to_vec();
    if is_composite {
        allowed.extend_from_slice(COMPOSITE_FIELDS);
    }
    allowed.extend_from_slice(specific);
    obj.check_fields(&allowed, &mut cx);

    let mut def = bare_agent(name, pos, kind_pos, AgentKind::Unsupported(String::new()));
    def.description = cx.string(&obj, "description").map(|s| s.value).unwrap_or_default();
    def.inputs = cx.string_list(&obj, "inputs");
    def.output_key = cx.nonempty(&obj, "output_key").map(|s| s.value);
    def.optional = cx.boolean(&obj, "optional");
    def.is_async = cx.boolean(&obj, "async");
    def.timeout_ms = cx.int(&obj, "timeout_ms", 1, u64::MAX);
    // A wait suspends the run (durably, across restarts) until its time: an invocation timeout would never
    // apply to it (SPEC.md §3).
    if kind == "wait"
        && let Some(node) = obj.get("timeout_ms")
    {
        cx.err(
            node.pos,
            Some("timeout_ms"),
            "a `wait` has no timeout: it suspends the run until its `for` or `until`, which no invocation timeout \
             cuts short; to wait less, give a shorter `for` or an earlier `until`",
        );
    }
    def.budget = obj.get("budget").and_then(|node| parse_budget(node, &mut cx));
    if is_composite {
        def.composite = Some(CompositeCommon {
            output: cx.nonempty(&obj, "output"),
            error_handler: obj.get("error_handler").and_then(|n| parse_error_handler(n, &mut cx)),
            compensate_on_error: cx.boolean(&obj, "compensate_on_error"),
        });
    }
    def.kind = match kind {
        "compute" => match (cx.nonempty(&obj, "value"), cx.nonempty(&obj, "template")) {
            (Some(v), None) => AgentKind::Compute(ComputeBody::Value(v)),
            (None, Some(t)) => AgentKind::Compute(ComputeBody::Template(t)),
            (Some(_), Some(t)) => {
                cx.err(t.pos, None, "a compute agent takes either `value` or `template`, not both");
                return None;
            }
            (None, None) => {
                if obj.get("value").is_none() && obj.get("template").is_none() {
                    let suggested = cx.suggested.iter().any(|s| s == "value" || s == "template");
                    if !suggested {
                        cx.err(pos, None, "missing field `value` (an expression) or `template`");
                    }
                }
                return None;
            }
        },
        "human" => {
            let prompt = cx.required(&obj, "prompt");
            let pending_mode = match cx.nonempty(&obj, "mode") {
                None => false,
                Some(m) if m.value == "suspend" => false,
                Some(m) if m.value == "pending" => true,
                Some(m) => {
                    cx.err(m.pos, Some("mode"), format!("unknown mode `{}`, expected `suspend` or `pending`", m.value));
                    return None;
                }
            };
            let response_id = cx.nonempty(&obj, "response_id").map(|s| s.value);
            let deadline = match cx.nonempty(&obj, "deadline") {
                None => None,
                Some(d) => Some(Located::new(
                    match parse_duration(&d.value) {
                        Ok(ms) => DeadlineDef::After(ms),
                        Err(message) if message.ends_with("is too long") => {
                            cx.err(d.pos, Some("deadline"), message);
                            return None;
                        }
                        Err(_) => DeadlineDef::At(d.value.clone()),
                    },
                    d.pos,
                )),
            };
            let on_timeout = obj.get("on_timeout").and_then(|node| parse_on_timeout(node, &mut cx));
            if on_timeout.is_some() && deadline.is_none() {
                cx.err(obj.pos, Some("on_timeout"), "`on_timeout` needs a `deadline`");
                return None;
            }
            AgentKind::Human { prompt: prompt?, pending_mode, response_id, deadline, on_timeout }
        }
        "wait" => match (obj.get("for"), cx.nonempty(&obj, "until")) {
            (Some(node), None) => {
                let text = cx.nonempty(&obj, "for")?;
                match parse_duration(&text.value) {
                    Ok(ms) => AgentKind::Wait(WaitDef::For(ms)),
                    Err(message) => {
                        cx.err(node.pos, Some("for"), message);
                        return None;
                    }
                }
            }
            (None, Some(until)) => AgentKind::Wait(WaitDef::Until(until)),
            (Some(node), Some(_)) => {
                cx.err(node.pos, None, "a wait takes either `for` (a duration) or `until` (a time), not both");
                return None;
            }
            (None, None) => {
                if obj.get("until").is_none() {
                    cx.missing(pos, "for", "missing field `for` (a duration: \"90s\", \"2h\") or `until` (a time)");
                }
                return None;
            }
        },
        "mcp" => {
            let server = match obj.get("server") {
                None => {
                    cx.missing(
                        obj.pos,
                        "server",
                        "missing field `server` (a name in `mcp_servers`, `{command: [program, args..]}` or `{url: ..}`)",
                    );
                    None
                }
                Some(node) => match node.as_str() {
                    Some(name) if !name.trim().is_empty() => {
                        Some(Located::new(McpServerDef::Named { name: name.to_string() }, node.pos))
                    }
                    _ => parse_mcp_server(node, &mut cx, "server"),
                },
            };
            let tool = cx.nonempty(&obj, "tool");
            let effect = parse_effect(&obj, &mut cx, Effect::Once);
            AgentKind::Mcp(McpDef { server: server?, tool, effect })
        }
        "a2a" => {
            let url = cx.required(&obj, "url");
            if let Some(u) = &url
                && !(u.value.starts_with("http://") || u.value.starts_with("https://"))
            {
                cx.err(u.pos, Some("url"), format!("expected an http:// or https:// URL, found `{}`", u.value));
                return None;
            }
            let tenant = cx.nonempty(&obj, "tenant");
            let tenant_key = cx.nonempty(&obj, "tenant_key");
            if let (Some(_), Some(k)) = (&tenant, &tenant_key) {
                cx.err(k.pos, Some("tenant_key"), "give either `tenant` (fixed) or `tenant_key` (per call), not both");
                return None;
            }
            let stream = obj.get("stream").is_none() || cx.boolean(&obj, "stream");
            AgentKind::A2a(A2aDef {
                url: url?,
                tenant,
                tenant_key,
                message: cx.nonempty(&obj, "message"),
                context_key: cx.nonempty(&obj, "context_key"),
                task_key: cx.nonempty(&obj, "task_key"),
                stream,
                headers: string_map(&obj, "headers", "headers", &mut cx)?,
            })
        }
        "llm" => AgentKind::Llm(Box::new(parse_llm(&obj, pos, &mut cx)?)),
        _ => match &described {
            Some(k) => AgentKind::Planner(parse_described(k, &obj, pos, &mut cx)?),
            None => return None,
        },
    };
    Some(def)
}

/// The fields of an agent whose kind a descriptor defines, checked against the kind's declared types; `pos`
/// (the agent's) locates a model field left out.
fn parse_described(kind: &KindRef, obj: &Obj<'_>, pos: Pos, cx: &mut Cx<'_>) -> Option<PlannerDef> {
    let before = cx.sink_len();
    let fields = parse_fields(kind.descriptor().fields(), obj, pos, cx);
    (cx.sink_len() == before).then(|| PlannerDef { kind: kind.clone(), fields })
}

/// The values of the declared `fields` in `obj` (a kind's, or an entry's of a list field), in declared order;
/// errors recorded. A model field left out names `default`, located at `pos`.
fn parse_fields(fields: &[KindField], obj: &Obj<'_>, pos: Pos, cx: &mut Cx<'_>) -> Vec<(String, FieldValue)> {
    let mut out = Vec::new();
    for field in fields {
        let name = field.name;
        let Some(node) = obj.get(name) else {
            if field.required {
                cx.missing(obj.pos, name, format!("missing field `{name}` ({})", field.ty.described()));
            } else if let FieldType::Model(_) = field.ty {
                let default = ModelField::named(Located::new("default".to_string(), pos));
                out.push((name.to_string(), FieldValue::Model(default)));
            }
            continue;
        };
        let located = |v: Value| Some(FieldValue::Value(Located::new(v, node.pos)));
        let value = match field.ty {
            FieldType::Agents => match cx.string_list(obj, name) {
                Some(list) if list.len() < field.min_items => {
                    let (n, found) = (field.min_items, list.len());
                    let agents = if n == 1 { "agent" } else { "agents" };
                    cx.err(node.pos, Some(name), format!("needs at least {n} {agents}, found {found}"));
                    None
                }
                list => list.map(FieldValue::Agents),
            },
            FieldType::Agent => cx.nonempty(obj, name).map(FieldValue::Agent),
            FieldType::String => cx.string(obj, name).and_then(|s| located(Value::String(s.value))),
            FieldType::Name | FieldType::Key => cx.nonempty(obj, name).and_then(|s| located(Value::String(s.value))),
            FieldType::Integer { min, max } => match signed(obj, cx, name) {
                Some(v) if (min..=max).contains(&v) => located(Value::from(v)),
                Some(v) => {
                    let range = if max >= i64::from(u32::MAX) {
                        format!("at least {min}")
                    } else {
                        format!("between {min} and {max}")
                    };
                    cx.err(node.pos, Some(name), format!("must be {range}, found {v}"));
                    None
                }
                None => None,
            },
            FieldType::Number => cx.number(obj, name).and_then(|n| located(Value::from(n))),
            FieldType::NumberIn { min, max, exclusive } => match cx.number(obj, name) {
                Some(n) if (exclusive && n > min && n < max) || (!exclusive && n >= min && n <= max) => {
                    located(Value::from(n))
                }
                Some(_) => {
                    let range = if exclusive { "strictly between" } else { "between" };
                    cx.err(node.pos, Some(name), format!("must be {range} {min} and {max}, found {}", node.to_json()));
                    None
                }
                None => None,
            },
            FieldType::Bool => match node.value {
                NodeValue::Bool(b) => located(Value::Bool(b)),
                _ => {
                    cx.err(node.pos, Some(name), format!("expected true or false, found {}", node.type_name()));
                    None
                }
            },
            FieldType::Choice(words) => choice(obj, cx, name, words).and_then(|w| located(Value::String(w))),
            FieldType::Expression => cx.nonempty(obj, name).map(FieldValue::Expression),
            FieldType::List(inner) => parse_entries(field, inner, node, cx).map(FieldValue::List),
            FieldType::AgentOf(_) => cx.nonempty(obj, name).map(FieldValue::AgentOf),
            FieldType::Model(_) => model_field(obj, name, pos, cx).map(FieldValue::Model),
            _ => located(node.to_json()),
        };
        if let Some(value) = value {
            out.push((name.to_string(), value));
        }
    }
    out
}

/// The entries of a list field (`node`), each a mapping of the `inner` fields, with its errors nested under
/// `field[i]`; a [`KindField::unique`] field's value given twice is refused where the second is written.
fn parse_entries(field: &KindField, inner: &[KindField], node: &Node, cx: &mut Cx<'_>) -> Option<Vec<EntryDef>> {
    let NodeValue::Seq(items) = &node.value else {
        cx.err(node.pos, Some(field.name), format!("expected {}, found {}", field.ty.described(), node.type_name()));
        return None;
    };
    let allowed: Vec<&str> = inner.iter().map(|f| f.name).collect();
    // The misspellings of the enclosing mapping stay known after the entries' own.
    let enclosing = std::mem::take(&mut cx.suggested);
    let mut entries: Vec<EntryDef> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let before = cx.sink_len();
        if let Some(entry) = cx.obj(item, None, "field") {
            entry.check_fields(&allowed, cx);
            let fields = parse_fields(inner, &entry, item.pos, cx);
            for unique in inner.iter().filter(|f| f.unique) {
                let value = |fields: &[(String, FieldValue)]| match fields.iter().find(|(n, _)| n == unique.name) {
                    Some((_, FieldValue::Value(v))) => Some(v.clone()),
                    _ => None,
                };
                let Some(this) = value(&fields) else { continue };
                if let Some(first) = entries.iter().find_map(|e| value(&e.fields).filter(|v| v.value == this.value)) {
                    let shown = this.value.as_str().map_or_else(|| this.value.to_string(), str::to_string);
                    let (line, column) = (first.pos.line, first.pos.column);
                    let msg =
                        format!("duplicate {} `{shown}` (first defined at line {line}, column {column})", unique.name);
                    cx.err(this.pos, Some(unique.name), msg);
                }
            }
            entries.push(EntryDef { pos: item.pos, fields });
        }
        cx.nest_since(before, &format!("{}[{i}]", field.name));
    }
    cx.suggested = enclosing;
    Some(entries)
}

/// A duration as SPEC.md §3 writes it: `<integer><unit>`, unit `ms` `s` `m` `h` `d` (`"90s"`, `"2h"`), in
/// milliseconds.
///
/// # Errors
/// What is wrong with `text`, as a message for the field.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    let scale: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if scale > 0 => n.checked_mul(scale).ok_or_else(|| format!("the duration `{text}` is too long")),
        Err(_) if scale > 0 && !number.is_empty() => Err(format!("the duration `{text}` is too long")),
        _ => Err(format!("`{text}` is not a duration: write <integer><unit>, unit ms, s, m, h or d (\"90s\", \"2h\")")),
    }
}

/// `on_timeout`: `fail`, `{default: <expression>}` or `{escalate: <human agent>}`.
fn parse_on_timeout(node: &Node, cx: &mut Cx<'_>) -> Option<Located<OnTimeoutDef>> {
    const EXPECTED: &str = "expected `fail`, `{default: <expression>}` or `{escalate: <name of a human agent>}`";
    if let Some(text) = node.as_str() {
        if text == "fail" {
            return Some(Located::new(OnTimeoutDef::Fail, node.pos));
        }
        cx.err(node.pos, Some("on_timeout"), format!("unknown `on_timeout` `{text}`: {EXPECTED}"));
        return None;
    }
    let obj = cx.obj(node, Some("on_timeout"), "field")?;
    obj.check_fields(&["default", "escalate"], cx);
    match (cx.nonempty(&obj, "default"), cx.nonempty(&obj, "escalate")) {
        (Some(d), None) => Some(Located::new(OnTimeoutDef::Default(d), node.pos)),
        (None, Some(e)) => Some(Located::new(OnTimeoutDef::Escalate(e), node.pos)),
        _ => {
            cx.err(node.pos, Some("on_timeout"), format!("takes exactly one of `default` and `escalate`: {EXPECTED}"));
            None
        }
    }
}

fn bare_agent(name: &str, pos: Pos, kind_pos: Pos, kind: AgentKind) -> AgentDef {
    AgentDef {
        name: name.to_string(),
        pos,
        kind_pos,
        description: String::new(),
        inputs: None,
        output_key: None,
        optional: false,
        is_async: false,
        timeout_ms: None,
        budget: None,
        composite: None,
        kind,
    }
}

fn parse_error_handler(node: &Node, cx: &mut Cx<'_>) -> Option<ErrorHandlerDef> {
    let before = cx.sink_len();
    let obj = cx.obj(node, None, "field");
    let Some(obj) = obj else {
        cx.nest_since(before, "error_handler");
        return None;
    };
    obj.check_fields(&["when", "set", "retry", "backoff_ms", "fallback"], cx);
    let set = obj.get("set").map(|n| parse_set(n, cx)).unwrap_or_default();
    let retry = cx.int(&obj, "retry", 0, u64::from(u32::MAX)).and_then(|v| u32::try_from(v).ok());
    if let Some(set_node) = obj.get("set")
        && obj.get("retry").is_none_or(|_| retry == Some(0))
    {
        // The writes are made before a retry: without retries they could never be made.
        let found = if obj.get("retry").is_some() { "`retry` is 0" } else { "`retry` is not set (default 0)" };
        let msg = format!("`set` needs `retry` ≥ 1 (its writes are made before a retry), but {found}");
        cx.err(set_node.pos, Some("set"), msg);
    }
    let def = ErrorHandlerDef {
        pos: node.pos,
        set,
        retry: retry.unwrap_or(0),
        backoff_ms: cx.int(&obj, "backoff_ms", 0, u64::MAX).unwrap_or(100),
        fallback: cx.nonempty(&obj, "fallback"),
        when: cx.nonempty(&obj, "when"),
    };
    cx.nest_since(before, "error_handler");
    Some(def)
}

/// `set: {KEY: EXPRESSION, ...}` of an error handler: the state keys written before a retry.
fn parse_set(node: &Node, cx: &mut Cx<'_>) -> Vec<(String, Located<String>)> {
    let before = cx.sink_len();
    let mut out = Vec::new();
    if let Some(obj) = cx.obj(node, None, "key") {
        for (key, key_pos, value) in &obj.entries {
            if key.trim().is_empty() {
                cx.err(*key_pos, None, "a state key must not be empty");
                continue;
            }
            match &value.value {
                NodeValue::Str(s) if !s.trim().is_empty() => {
                    out.push((key.clone(), Located::new(s.clone(), value.pos)))
                }
                NodeValue::Str(_) => cx.err(value.pos, Some(key), "must not be empty"),
                _ => cx.err(
                    value.pos,
                    Some(key),
                    format!("expected an expression (a string, e.g. \"5\" or \"'text'\"), found {}", value.type_name()),
                ),
            }
        }
    }
    cx.nest_since(before, "set");
    out
}

fn kinds_list() -> String {
    let quoted = |kinds: &mut dyn Iterator<Item = &str>| kinds.map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    let builtin = quoted(&mut SUPPORTED_KINDS.iter().chain(UNSUPPORTED_KINDS).copied());
    let registered = crate::kind::registered_kinds();
    if registered.is_empty() {
        builtin
    } else {
        format!("{builtin}; registered by this program: {}", quoted(&mut registered.iter().map(String::as_str)))
    }
}

/// A `model` field (SPEC.md §1, §7) of `obj`: a name in `models`, or `{choose: <expression>, default:
/// <name>}`; `default` (located at `pos`) when the field is left out.
fn model_field(obj: &Obj<'_>, field: &str, pos: Pos, cx: &mut Cx<'_>) -> Option<ModelField> {
    let Some(node) = obj.get(field) else {
        return Some(ModelField::named(Located::new("default".to_string(), pos)));
    };
    if !matches!(node.value, NodeValue::Map(_)) {
        if !matches!(node.value, NodeValue::Str(_)) {
            let found = node.type_name();
            let msg = format!("expected a model name or `{{choose: <expression>, default: <name>}}`, found {found}");
            cx.err(node.pos, Some(field), msg);
            return None;
        }
        return cx.nonempty(obj, field).map(ModelField::named);
    }
    let before = cx.sink_len();
    let choice = cx.obj(node, Some(field), "field").and_then(|m| {
        m.check_fields(&["choose", "default"], cx);
        let choose = cx.required(&m, "choose");
        let default = cx.required(&m, "default");
        Some(ModelField { name: default?, choose: Some(choose?) })
    });
    cx.nest_since(before, field);
    choice
}

/// The fields of an `llm` agent (SPEC.md, leaf kinds).
fn parse_llm(obj: &Obj<'_>, pos: Pos, cx: &mut Cx<'_>) -> Option<crate::model::LlmDef> {
    let model = model_field(obj, "model", pos, cx);
    let system = cx.nonempty(obj, "system");
    let user = cx.required(obj, "user");
    let output = match obj.get("output") {
        None => Some(agentic_agents::OutputType::String),
        Some(node) => parse_output(node, cx),
    };
    let memory_window = obj.get("memory").and_then(|node| {
        let before = cx.sink_len();
        let window = cx.obj(node, None, "field").and_then(|m| {
            m.check_fields(&["window"], cx);
            if m.get("window").is_none() {
                cx.missing(m.pos, "window", "missing field `window` (messages kept)");
                return None;
            }
            cx.int(&m, "window", 1, u64::from(u32::MAX)).and_then(|w| usize::try_from(w).ok())
        });
        cx.nest_since(before, "memory");
        window
    });
    let mut context_summarized = true;
    let context = obj
        .get("context")
        .and_then(|node| {
            let before = cx.sink_len();
            let names = cx.obj(node, None, "field").and_then(|c| {
                c.check_fields(&["summarized", "conversation"], cx);
                match (c.get("summarized"), c.get("conversation")) {
                    (Some(_), None) => cx.string_list(&c, "summarized"),
                    (None, Some(_)) => {
                        context_summarized = false;
                        cx.string_list(&c, "conversation")
                    }
                    (Some(_), Some(n)) => {
                        cx.err(n.pos, None, "the context is either `summarized` or `conversation`, not both");
                        None
                    }
                    (None, None) => {
                        cx.missing(
                            c.pos,
                            "summarized",
                            "missing field `summarized` or `conversation` (a list of agent names)",
                        );
                        None
                    }
                }
            });
            cx.nest_since(before, "context");
            names
        })
        .unwrap_or_default();
    let has_context = obj.get("context").is_some();
    let (tools, mcp_tools) = obj.get("tools").map(|node| parse_tools(node, cx)).unwrap_or_default();
    let max_tool_iterations = cx.int(obj, "max_tool_iterations", 1, 1000).and_then(|n| usize::try_from(n).ok());
    let tool_choice = cx.nonempty(obj, "tool_choice").and_then(|c| {
        use agentic_agents::model::ToolChoice;
        match c.value.as_str() {
            "auto" => Some(ToolChoice::Auto),
            "none" => Some(ToolChoice::None),
            "required" if tools.is_empty() && mcp_tools.is_empty() => {
                cx.err(c.pos, Some("tool_choice"), "`required` needs at least one tool in `tools`");
                None
            }
            "required" => Some(ToolChoice::Required),
            name if tools.iter().any(|t| t.name.value == name) => Some(ToolChoice::Tool(name.to_string())),
            // An MCP server's tools are known when the agent runs: checked then.
            name if !mcp_tools.is_empty() => Some(ToolChoice::Tool(name.to_string())),
            name => {
                let names: Vec<&str> = tools.iter().map(|t| t.name.value.as_str()).collect();
                let hint = match suggest(name, names.iter().copied().chain(["auto", "none", "required"])) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                let tools_text = if list.is_empty() {
                    "no tools are defined".to_string()
                } else {
                    format!("the tools are {}", list.join(", "))
                };
                cx.err(
                    c.pos,
                    Some("tool_choice"),
                    format!(
                        "`{name}` is neither `auto`, `none`, `required` nor a tool of this agent{hint}; {tools_text}"
                    ),
                );
                None
            }
        }
    });
    let temperature = cx.number(obj, "temperature").filter(|t| {
        let ok = (0.0..=2.0).contains(t);
        if !ok && let Some(node) = obj.get("temperature") {
            cx.err(node.pos, Some("temperature"), format!("must be between 0 and 2, found {t}"));
        }
        ok
    });
    let max_tokens = cx.int(obj, "max_tokens", 1, u64::from(u32::MAX)).and_then(|n| u32::try_from(n).ok());
    let stream = cx.boolean(obj, "stream");
    let confidence_key = cx.nonempty(obj, "confidence_key");
    let scores_key = cx.nonempty(obj, "scores_key");
    for (field, key) in [("confidence_key", &confidence_key), ("scores_key", &scores_key)] {
        if let (Some(key), Some(output)) = (key, &output)
            && !matches!(output, agentic_agents::OutputType::Enum(_))
        {
            cx.err(
                key.pos,
                Some(field),
                format!("needs an enum output (`output: {{enum: [..]}}`), but the output is {}", output.describe()),
            );
        }
    }
    Some(crate::model::LlmDef {
        model: model?,
        system,
        user: user?,
        output: output?,
        memory_window,
        context,
        context_summarized,
        has_context,
        tools,
        mcp_tools,
        max_tool_iterations,
        tool_choice,
        temperature,
        max_tokens,
        stream,
        confidence_key,
        scores_key,
    })
}

/// `tools: [{name, description, parameters, value | template, effect, approve} | {mcp, filter, rename, effect,
/// approve}]`.
fn parse_tools(node: &Node, cx: &mut Cx<'_>) -> (Vec<crate::model::ToolDef>, Vec<McpToolsDef>) {
    use crate::model::ToolDef;
    let NodeValue::Seq(items) = &node.value else {
        cx.err(node.pos, Some("tools"), format!("expected a list of tools, found {}", node.type_name()));
        return (Vec::new(), Vec::new());
    };
    let mut out: Vec<ToolDef> = Vec::with_capacity(items.len());
    let mut mcp: Vec<McpToolsDef> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let before = cx.sink_len();
        if let NodeValue::Map(entries) = &item.value
            && entries.iter().any(|(k, _)| k.key_text() == "mcp")
        {
            mcp.extend(cx.obj(item, None, "field").and_then(|t| parse_mcp_tools(&t, cx)));
            cx.nest_since(before, &format!("tools[{i}]"));
            continue;
        }
        let tool = cx.obj(item, None, "field").and_then(|t| {
            t.check_fields(&["name", "description", "parameters", "value", "template", "effect", "approve"], cx);
            let name = cx.required(&t, "name");
            if let Some(n) = &name {
                if !n.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    cx.err(
                        n.pos,
                        Some("name"),
                        format!("`{}`: a tool name has only letters, digits, `_` and `-`", n.value),
                    );
                } else if let Some(first) = out.iter().find(|d| d.name.value == n.value) {
                    let at = first.name.pos;
                    cx.err(
                        n.pos,
                        Some("name"),
                        format!("two tools are named `{}` (first at line {}, column {})", n.value, at.line, at.column),
                    );
                }
            }
            let description = cx.string(&t, "description").map(|d| d.value).unwrap_or_default();
            let parameters = t.get("parameters").map(|p| parse_parameters(p, cx)).unwrap_or_default();
            let body = match (cx.nonempty(&t, "value"), cx.nonempty(&t, "template")) {
                (Some(v), None) => Some(ComputeBody::Value(v)),
                (None, Some(b)) => Some(ComputeBody::Template(b)),
                (Some(_), Some(b)) => {
                    cx.err(b.pos, None, "a tool takes either `value` or `template`, not both");
                    None
                }
                (None, None) => {
                    if t.get("value").is_none() && t.get("template").is_none() {
                        cx.missing(
                            t.pos,
                            "value",
                            "missing field `value` (an expression over the arguments) or `template`",
                        );
                    }
                    None
                }
            };
            let effect = parse_effect(&t, cx, Effect::None);
            let approve = parse_approve(&t, cx);
            Some(ToolDef { name: name?, description, parameters, body: body?, effect, approve })
        });
        cx.nest_since(before, &format!("tools[{i}]"));
        out.extend(tool);
    }
    (out, mcp)
}

/// A tool name: letters, digits, `_` and `-`.
fn is_tool_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `{mcp: <server>, filter: [tool names], rename: {tool: name}, effect, approve}`: an MCP server's tools in
/// `tools`.
fn parse_mcp_tools(t: &Obj<'_>, cx: &mut Cx<'_>) -> Option<McpToolsDef> {
    t.check_fields(&["mcp", "filter", "rename", "effect", "approve"], cx);
    let server = cx.nonempty(t, "mcp");
    let filter = cx.string_list(t, "filter");
    let mut rename = Vec::new();
    if let Some(node) = t.get("rename")
        && let Some(map) = cx.obj(node, Some("rename"), "tool name")
    {
        for (from, _, to) in &map.entries {
            let field = format!("rename.{from}");
            match to.as_str() {
                Some(name) if is_tool_name(name) => {
                    if let Some(f) = &filter
                        && !f.iter().any(|n| &n.value == from)
                    {
                        let msg = format!("renames `{from}`, which `filter` leaves out");
                        cx.err(to.pos, Some(&field), msg);
                        continue;
                    }
                    rename.push((from.clone(), Located::new(name.to_string(), to.pos)));
                }
                Some(name) => {
                    let msg = format!("`{name}`: a tool name has only letters, digits, `_` and `-`");
                    cx.err(to.pos, Some(&field), msg);
                }
                None => cx.err(to.pos, Some(&field), format!("expected a tool name, found {}", to.type_name())),
            }
        }
    }
    let effect = parse_effect(t, cx, Effect::Once);
    let approve = parse_approve(t, cx);
    Some(McpToolsDef { server: server?, filter, rename, effect, approve })
}

/// `effect: none | retry | once` (SPEC.md §4) of a tool entry or an `mcp` agent; `default` when not written
/// (and after an error, which is recorded).
fn parse_effect(obj: &Obj<'_>, cx: &mut Cx<'_>, default: Effect) -> Effect {
    const EFFECTS: [&str; 3] = ["none", "retry", "once"];
    let Some(node) = obj.get("effect") else { return default };
    let Some(text) = node.as_str() else {
        let msg = format!("expected `none`, `retry` or `once`, found {}", node.type_name());
        cx.err(node.pos, Some("effect"), msg);
        return default;
    };
    match text.parse::<Effect>() {
        Ok(effect) => effect,
        Err(_) => {
            let hint = match suggest(text, EFFECTS) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            let msg = format!("unknown effect `{text}`{hint}, expected `none`, `retry` or `once`");
            cx.err(node.pos, Some("effect"), msg);
            default
        }
    }
}

/// `approve: true | false | <expression>` (SPEC.md §4) of a tool entry; the expression is compiled here so
/// that a syntax error is reported at the field; the words `yes`, `no`, `on`, `off` (strings in YAML 1.2) are
/// refused with a hint. Not written (or after an error, which is recorded): no call waits.
fn parse_approve(obj: &Obj<'_>, cx: &mut Cx<'_>) -> ApproveDef {
    let Some(node) = obj.get("approve") else { return ApproveDef::Never };
    match &node.value {
        NodeValue::Bool(true) => ApproveDef::Always,
        NodeValue::Bool(false) => ApproveDef::Never,
        NodeValue::Str(src) if src.trim().is_empty() => {
            cx.err(node.pos, Some("approve"), "must not be empty");
            ApproveDef::Never
        }
        // YAML 1.2 reads these words as strings; as an expression they would name a state key.
        NodeValue::Str(src) if ["yes", "no", "on", "off"].contains(&src.trim().to_ascii_lowercase().as_str()) => {
            let msg = format!("`{src}` is not a boolean (did you mean true/false?)");
            cx.err(node.pos, Some("approve"), msg);
            ApproveDef::Never
        }
        NodeValue::Str(src) => match agentic_agents::Expression::compile(src) {
            Ok(_) => ApproveDef::When(Located::new(src.clone(), node.pos)),
            Err(e) => {
                let msg = format!("invalid expression: {}", crate::validate::expr_message(&e));
                cx.err(node.pos, Some("approve"), msg);
                ApproveDef::Never
            }
        },
        _ => {
            let msg = format!(
                "expected true, false or an expression over `args`, `tool` and the state, found {}",
                node.type_name()
            );
            cx.err(node.pos, Some("approve"), msg);
            ApproveDef::Never
        }
    }
}

/// `parameters: {name: type-or-schema}` of a tool.
fn parse_parameters(node: &Node, cx: &mut Cx<'_>) -> Vec<(String, serde_json::Value)> {
    const TYPES: [&str; 5] = ["string", "number", "integer", "boolean", "json"];
    let Some(obj) = cx.obj(node, Some("parameters"), "parameter") else { return Vec::new() };
    let mut out = Vec::with_capacity(obj.entries.len());
    for (name, _, value) in &obj.entries {
        let schema = match &value.value {
            NodeValue::Str(t) if t == "json" => serde_json::json!({}),
            NodeValue::Str(t) if TYPES.contains(&t.as_str()) => serde_json::json!({ "type": t }),
            NodeValue::Str(t) => {
                let hint = match suggest(t, TYPES) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                cx.err(
                    value.pos,
                    Some(&format!("parameters.{name}")),
                    format!("unknown type `{t}`{hint}, expected `string`, `number`, `integer`, `boolean`, `json` or a JSON schema"),
                );
                continue;
            }
            NodeValue::Map(_) => {
                const JSON_TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];
                let schema = value.to_json();
                match schema.get("type") {
                    None => {}
                    Some(serde_json::Value::String(t)) if JSON_TYPES.contains(&t.as_str()) => {}
                    Some(serde_json::Value::Array(ts))
                        if ts.iter().all(|t| t.as_str().is_some_and(|t| JSON_TYPES.contains(&t))) => {}
                    Some(other) => {
                        let hint = match other.as_str().and_then(|t| suggest(t, JSON_TYPES)) {
                            Some(s) => format!(" (did you mean `{s}`?)"),
                            None => String::new(),
                        };
                        cx.err(
                            value.pos,
                            Some(&format!("parameters.{name}.type")),
                            format!(
                                "{other} is not a JSON schema type{hint}, expected one of `string`, `number`, \
                                 `integer`, `boolean`, `object`, `array`, `null`"
                            ),
                        );
                        continue;
                    }
                }
                schema
            }
            _ => {
                cx.err(
                    value.pos,
                    Some(&format!("parameters.{name}")),
                    format!("expected a type name or a JSON schema, found {}", value.type_name()),
                );
                continue;
            }
        };
        out.push((name.clone(), schema));
    }
    out
}

/// `output`: `string` | `number` | `integer` | `boolean` | `json` | `{enum: [..]}` | `{schema: {..}}`.
fn parse_output(node: &Node, cx: &mut Cx<'_>) -> Option<agentic_agents::OutputType> {
    use agentic_agents::OutputType;
    const EXPECTED: &str =
        "expected `string`, `number`, `integer`, `boolean`, `json`, `{enum: [..]}` or `{schema: {..}}`";
    match &node.value {
        NodeValue::Str(s) => match s.as_str() {
            "string" => Some(OutputType::String),
            "number" => Some(OutputType::Number),
            "integer" => Some(OutputType::Integer),
            "boolean" => Some(OutputType::Boolean),
            "json" => Some(OutputType::Json),
            other => {
                let hint = match suggest(other, ["string", "number", "integer", "boolean", "json"]) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                cx.err(node.pos, Some("output"), format!("unknown output type `{other}`{hint}, {EXPECTED}"));
                None
            }
        },
        NodeValue::Map(entries) if entries.len() == 1 => {
            let (key, value) = &entries[0];
            match (key.key_text().as_str(), &value.value) {
                ("enum", NodeValue::Seq(items)) => {
                    let mut names = Vec::with_capacity(items.len());
                    for item in items {
                        match item.as_str() {
                            Some(s) if !s.trim().is_empty() => names.push(s.to_string()),
                            _ => {
                                cx.err(
                                    item.pos,
                                    Some("output.enum"),
                                    format!("expected a name, found {}", item.type_name()),
                                );
                                return None;
                            }
                        }
                    }
                    if names.is_empty() {
                        cx.err(value.pos, Some("output.enum"), "must list at least one name");
                        return None;
                    }
                    Some(OutputType::Enum(names))
                }
                ("schema", NodeValue::Map(_)) => Some(OutputType::Schema(value.to_json())),
                ("enum", _) => {
                    cx.err(
                        value.pos,
                        Some("output.enum"),
                        format!("expected a list of names, found {}", value.type_name()),
                    );
                    None
                }
                ("schema", _) => {
                    cx.err(
                        value.pos,
                        Some("output.schema"),
                        format!("expected a JSON schema mapping, found {}", value.type_name()),
                    );
                    None
                }
                (other, _) => {
                    cx.err(key.pos, Some("output"), format!("unknown output `{other}`, {EXPECTED}"));
                    None
                }
            }
        }
        _ => {
            cx.err(node.pos, Some("output"), format!("{EXPECTED}, found {}", node.type_name()));
            None
        }
    }
}

/// A string field taking one of `allowed` (default: the first); `None` after reporting a bad value.
fn choice(obj: &Obj<'_>, cx: &mut Cx<'_>, field: &str, allowed: &[&str]) -> Option<String> {
    if obj.get(field).is_none() {
        return allowed.first().map(|s| s.to_string());
    }
    let value = cx.nonempty(obj, field)?;
    if allowed.contains(&value.value.as_str()) {
        return Some(value.value);
    }
    let quoted: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
    let list = match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    };
    cx.err(value.pos, Some(field), format!("unknown {field} `{}`, expected {list}", value.value));
    None
}

/// A signed integer field.
fn signed(obj: &Obj<'_>, cx: &mut Cx<'_>, field: &str) -> Option<i64> {
    let node = obj.get(field)?;
    match node.value {
        NodeValue::Int(i) => Some(i),
        NodeValue::UInt(u) => i64::try_from(u).ok().or_else(|| {
            cx.err(node.pos, Some(field), format!("must be at most {}, found {u}", i64::MAX));
            None
        }),
        _ => {
            cx.err(node.pos, Some(field), format!("expected an integer, found {}", node.type_name()));
            None
        }
    }
}
