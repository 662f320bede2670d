//! Cross-checks of a parsed spec: the root and every reference name a defined agent, every agent has at most
//! one parent, there is no cycle, and every expression and template compiles.

use std::collections::{HashMap, HashSet};

use agentic_agents::ExprError;
use agentic_agents::{Expression, Template};

use crate::error::{Sink, suggest};
use crate::kind::{FieldType, ModelUse};
use crate::model::{AgentDef, AgentKind, ComputeBody, FieldValue, Located, ModelField, ModelProvider};
use crate::node::Pos;

/// Deepest nesting of composites a spec may use.
pub const MAX_DEPTH: usize = 64;

/// Checks references, parents and cycles of `agents` rooted at `root`.
/// `names` are all the agent names defined, including agents whose definition had errors (so that a
/// reference to them is not reported again as unknown).
pub(crate) fn check_graph(agents: &[AgentDef], names: &[String], root: Option<&Located<String>>, sink: &mut Sink) {
    let defined: HashSet<&str> = names.iter().map(String::as_str).collect();
    let names = || names.iter().map(String::as_str);

    if let Some(root) = root
        && !defined.is_empty()
        && !defined.contains(root.value.as_str())
    {
        let msg = unknown_agent_message(&root.value, names());
        sink.push(root.pos, None, Some("root"), msg);
    }

    // parent[child] = (parent name, position of the reference)
    let mut parent: HashMap<&str, (&str, Pos)> = HashMap::new();
    for agent in agents {
        for r in agent.kind.references() {
            let child = r.value.as_str();
            if !defined.contains(child) {
                sink.push(r.pos, Some(&agent.name), None, unknown_agent_message(child, names()));
                continue;
            }
            if child == agent.name {
                sink.push(r.pos, Some(&agent.name), None, format!("agent `{child}` cannot contain itself"));
                continue;
            }
            // Would the edge agent -> child close a cycle? Walk up from `agent`.
            let mut chain = vec![agent.name.as_str()];
            let mut cur = agent.name.as_str();
            let mut cycle = false;
            while let Some((p, _)) = parent.get(cur) {
                chain.push(p);
                if *p == child {
                    cycle = true;
                    break;
                }
                cur = p;
                if chain.len() > defined.len() {
                    break;
                }
            }
            if cycle {
                chain.reverse();
                chain.push(child);
                let path = chain.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" -> ");
                sink.push(r.pos, Some(&agent.name), None, format!("cycle: {path}"));
                continue;
            }
            if let Some((first, at)) = parent.get(child) {
                let msg = if *first == agent.name {
                    format!(
                        "agent `{child}` is listed twice (first at line {}, column {}); an agent can run at one \
                         place only",
                        at.line, at.column
                    )
                } else {
                    format!(
                        "agent `{child}` is already used by `{first}` (line {}, column {}); an agent can have only \
                         one parent",
                        at.line, at.column
                    )
                };
                sink.push(r.pos, Some(&agent.name), None, msg);
                continue;
            }
            parent.insert(child, (agent.name.as_str(), r.pos));
        }
    }

    // Nesting depth: deep trees are valid up to a bound (each level is a supervisor; some walks recurse).
    // Report the first reference, in declaration order, that goes one level too deep.
    'depth: for agent in agents {
        for r in agent.kind.references() {
            let Some((_, at)) = parent.get(r.value.as_str()).filter(|(p, _)| *p == agent.name) else { continue };
            let mut depth = 1;
            let mut cur = r.value.as_str();
            while let Some((p, _)) = parent.get(cur) {
                depth += 1;
                cur = p;
                if depth > defined.len() {
                    break;
                }
            }
            if depth == MAX_DEPTH + 1 {
                let msg = format!(
                    "agent `{}` is nested {depth} levels deep; at most {MAX_DEPTH} levels are supported",
                    r.value
                );
                sink.push(*at, Some(&agent.name), None, msg);
                break 'depth;
            }
        }
    }

    if let Some(root) = root
        && let Some((p, at)) = parent.get(root.value.as_str())
    {
        let msg = format!("the root agent `{}` cannot also be a sub-agent", root.value);
        sink.push(*at, Some(p), None, msg);
    }
}

fn unknown_agent_message<'a>(name: &str, names: impl Iterator<Item = &'a str> + Clone) -> String {
    let hint = match suggest(name, names.clone()) {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => String::new(),
    };
    let mut defined: Vec<&str> = names.collect();
    defined.sort_unstable();
    let list = defined.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    format!("unknown agent `{name}`{hint}; defined agents: {list}")
}

/// Compiles every expression and template of `agent`, reporting syntax errors at the field.
pub(crate) fn check_expressions(agent: &AgentDef, sink: &mut Sink) {
    let mut expr = |field: &str, src: &Located<String>| {
        if let Err(e) = Expression::compile(&src.value) {
            sink.push(src.pos, Some(&agent.name), Some(field), format!("invalid expression: {}", expr_message(&e)));
        }
    };
    if let Some(c) = &agent.composite {
        if let Some(o) = &c.output {
            expr("output", o);
        }
        if let Some(h) = &c.error_handler {
            for (key, src) in &h.set {
                expr(&format!("error_handler.set.{key}"), src);
            }
            if let Some(f) = &h.fallback {
                expr("error_handler.fallback", f);
            }
            if let Some(w) = &h.when {
                expr("error_handler.when", w);
            }
        }
    }
    match &agent.kind {
        AgentKind::Compute(ComputeBody::Value(v)) => expr("value", v),
        AgentKind::Planner(planned) => planned.visit(&mut |path, _, value, _| {
            if let FieldValue::Expression(src) = value {
                expr(path, src);
            }
        }),
        AgentKind::Human { prompt, .. } => {
            if let Err(e) = Template::compile(&prompt.value) {
                sink.push(
                    prompt.pos,
                    Some(&agent.name),
                    Some("prompt"),
                    format!("invalid template: {}", expr_message(&e)),
                );
            }
        }
        AgentKind::Llm(llm) => {
            for (i, tool) in llm.tools.iter().enumerate() {
                let compiled = match &tool.body {
                    ComputeBody::Value(v) => Expression::compile(&v.value).err().map(|e| ("value", v, "expression", e)),
                    ComputeBody::Template(t) => {
                        Template::compile(&t.value).err().map(|e| ("template", t, "template", e))
                    }
                };
                if let Some((field, src, what, e)) = compiled {
                    let field = format!("tools[{i}].{field}");
                    sink.push(
                        src.pos,
                        Some(&agent.name),
                        Some(&field),
                        format!("invalid {what}: {}", expr_message(&e)),
                    );
                }
            }
            for (field, src) in [("system", llm.system.as_ref()), ("user", Some(&llm.user))] {
                if let Some(src) = src
                    && let Err(e) = Template::compile(&src.value)
                {
                    sink.push(
                        src.pos,
                        Some(&agent.name),
                        Some(field),
                        format!("invalid template: {}", expr_message(&e)),
                    );
                }
            }
        }
        AgentKind::A2a(a2a) => {
            if let Some(m) = &a2a.message
                && let Err(e) = Template::compile(&m.value)
            {
                sink.push(m.pos, Some(&agent.name), Some("message"), format!("invalid template: {}", expr_message(&e)));
            }
            // The message defaults to the inputs' values: with neither, the remote agent would get nothing.
            if a2a.message.is_none() && agent.inputs.as_ref().is_none_or(Vec::is_empty) {
                let msg = "an a2a agent sends `message` (a template) or, without it, the values of its `inputs`: \
                           give one of them";
                sink.push(agent.kind_pos, Some(&agent.name), None, msg.to_string());
            }
        }
        AgentKind::Compute(ComputeBody::Template(t)) => {
            if let Err(e) = Template::compile(&t.value) {
                sink.push(
                    t.pos,
                    Some(&agent.name),
                    Some("template"),
                    format!("invalid template: {}", expr_message(&e)),
                );
            }
        }
        _ => {}
    }
}

/// The compiler's message without the echo of the source text and without minijinja's internal source
/// name (`(in <expression>:1)`); for a multi-line source the line within it is kept (`line 2 of the source`).
pub(crate) fn expr_message(e: &ExprError) -> String {
    let (message, source) = match e {
        ExprError::Syntax { message, source_text } => (message.clone(), source_text.as_str()),
        other => return other.to_string(),
    };
    let Some(start) = message.rfind(" (in ") else { return message };
    let Some(inner) = message[start + 5..].strip_suffix(')') else { return message };
    let line = inner.rsplit_once(':').and_then(|(_, l)| l.parse::<u64>().ok());
    let head = &message[..start];
    match line {
        Some(l) if source.contains('\n') => format!("{head} (line {l} of the source)"),
        _ => head.to_string(),
    }
}

/// Checks the names `llm` agents use: `model` must name a model of the `models` section and
/// `context.summarized` must name defined agents.
pub(crate) fn check_llm(agents: &[AgentDef], models: &[crate::model::ModelDef], names: &[String], sink: &mut Sink) {
    let model_names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
    for agent in agents {
        let AgentKind::Llm(llm) = &agent.kind else { continue };
        check_choice(&llm.model, "model", &agent.name, &model_names, sink);
        let name = llm.model.name.value.as_str();
        if !model_names.contains(&name) {
            let defaulted = llm.model.name.pos == agent.pos;
            let hint = match suggest(name, model_names.iter().copied()) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            let defined = if model_names.is_empty() {
                "no models are defined (add a `models` section, e.g. `models: {default: {provider: openai}}`)"
                    .to_string()
            } else {
                let list = model_names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
                format!("defined models: {list}")
            };
            let what = if defaulted {
                "an llm agent without `model` uses `default`, which is not defined".to_string()
            } else {
                format!("unknown model `{name}`{hint}")
            };
            let field = if llm.model.choose.is_some() { "model.default" } else { "model" };
            sink.push(llm.model.name.pos, Some(&agent.name), Some(field), format!("{what}; {defined}"));
        }
        for c in &llm.context {
            if !names.contains(&c.value) {
                sink.push(
                    c.pos,
                    Some(&agent.name),
                    Some(if llm.context_summarized { "context.summarized" } else { "context.conversation" }),
                    unknown_agent_message(&c.value, names.iter().map(String::as_str)),
                );
            }
        }
    }
}

/// Checks a `model` field's choice (SPEC.md §7): its `choose` expression compiles, and every name it can give
/// as a literal ([`Expression::result_constants`]) is a model of the `models` section.
fn check_choice(model: &ModelField, field: &str, agent: &str, model_names: &[&str], sink: &mut Sink) {
    let Some(choose) = &model.choose else { return };
    let at = format!("{field}.choose");
    let expr = match Expression::compile(&choose.value) {
        Ok(e) => e,
        Err(e) => {
            sink.push(choose.pos, Some(agent), Some(&at), format!("invalid expression: {}", expr_message(&e)));
            return;
        }
    };
    for value in expr.result_constants() {
        let Some(name) = value.as_str() else {
            let msg = format!("`choose` can give {value}, which is not a model name (a string naming one of `models`)");
            sink.push(choose.pos, Some(agent), Some(&at), msg);
            continue;
        };
        if model_names.contains(&name) {
            continue;
        }
        let hint = match suggest(name, model_names.iter().copied()) {
            Some(s) => format!(" (did you mean `{s}`?)"),
            None => String::new(),
        };
        let list = model_names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let defined =
            if list.is_empty() { "no models are defined".to_string() } else { format!("defined models: {list}") };
        let msg = format!("`choose` can give `{name}`, which is not a model{hint}; {defined}");
        sink.push(choose.pos, Some(agent), Some(&at), msg);
    }
}

/// Checks the model fields of the described kinds (a supervisor's, a decision router's `model`): each names a
/// model of the `models` section, and one asked as a chat model is not a scripted decision model.
pub(crate) fn check_kind_models(agents: &[AgentDef], models: &[crate::model::ModelDef], sink: &mut Sink) {
    let model_names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
    for agent in agents {
        let AgentKind::Planner(planned) = &agent.kind else { continue };
        let kind = planned.kind.name();
        planned.visit(&mut |path, field, value, entry| {
            let (FieldValue::Model(chosen), FieldType::Model(used)) = (value, field.ty) else { return };
            check_choice(chosen, path, &agent.name, &model_names, sink);
            let model = &chosen.name;
            let path = &*if chosen.choose.is_some() { format!("{path}.default") } else { path.to_string() };
            let name = model.value.as_str();
            if let Some(def) = models.iter().find(|m| m.name == name) {
                // A chat model is asked: a scripted entry with only `decisions` has no chat replies.
                if let (ModelUse::Chat, ModelProvider::Scripted { replies, decisions }) = (used, &def.provider)
                    && replies.is_empty()
                    && !decisions.is_empty()
                {
                    let msg = format!(
                        "model `{name}` is a scripted decision model (`decisions` only), but a {kind}'s `{}` must \
                         be a chat model: give `models.{name}` `replies`",
                        field.name
                    );
                    sink.push(model.pos, Some(&agent.name), Some(path), msg);
                }
                return;
            }
            let defined = if model_names.is_empty() {
                "no models are defined (add a `models` section, e.g. `models: {default: {provider: local}}`)"
                    .to_string()
            } else {
                let list = model_names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
                format!("defined models: {list}")
            };
            // A field left out is located at its agent (or entry).
            let what = if model.pos == entry.unwrap_or(agent.pos) {
                format!("a {kind} without `{}` uses `default`, which is not defined", field.name)
            } else {
                let hint = match suggest(name, model_names.iter().copied()) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                format!("unknown model `{name}`{hint}")
            };
            sink.push(model.pos, Some(&agent.name), Some(path), format!("{what}; {defined}"));
        });
    }
}

/// Checks the [`FieldType::AgentOf`] fields of the described kinds (a blackboard rule's `agent`): each names a
/// defined agent that is one of the agents of the field it refers to.
pub(crate) fn check_agent_of(agents: &[AgentDef], names: &[String], sink: &mut Sink) {
    for agent in agents {
        let AgentKind::Planner(planned) = &agent.kind else { continue };
        planned.visit(&mut |path, field, value, _| {
            let (FieldValue::AgentOf(name), FieldType::AgentOf(of)) = (value, field.ty) else { return };
            let among: Vec<&Located<String>> = planned.field(of).map(FieldValue::references).unwrap_or_default();
            if !names.contains(&name.value) {
                let msg = unknown_agent_message(&name.value, names.iter().map(String::as_str));
                sink.push(name.pos, Some(&agent.name), Some(path), msg);
            } else if !among.iter().any(|s| s.value == name.value) {
                let list = among.iter().map(|s| format!("`{}`", s.value)).collect::<Vec<_>>().join(", ");
                let which = if of == "agents" { "the agents".to_string() } else { format!("the `{of}`") };
                let msg =
                    format!("agent `{}` is not one of {which} of this {} ({list})", name.value, planned.kind.name());
                sink.push(name.pos, Some(&agent.name), Some(path), msg);
            }
        });
    }
}

/// Checks every MCP server name an agent uses (`mcp` agents' `server: <name>`, `llm` agents'
/// `tools: [{mcp: <name>}]`): it must be declared in `mcp_servers`.
pub(crate) fn check_mcp_servers(agents: &[AgentDef], declared: &[String], sink: &mut Sink) {
    let names: Vec<&str> = declared.iter().map(String::as_str).collect();
    let mut check = |name: &str, pos: Pos, agent: &str, field: &str| {
        if names.contains(&name) {
            return;
        }
        let hint = match suggest(name, names.iter().copied()) {
            Some(s) => format!(" (did you mean `{s}`?)"),
            None => String::new(),
        };
        let declared = if names.is_empty() {
            "no MCP servers are declared (add `mcp_servers: {NAME: {command: [..]} | {url: ..}}`)".to_string()
        } else {
            format!("declared: {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        };
        sink.push(pos, Some(agent), Some(field), format!("unknown MCP server `{name}`{hint}; {declared}"));
    };
    for agent in agents {
        match &agent.kind {
            AgentKind::Mcp(m) => {
                if let crate::model::McpServerDef::Named { name } = &m.server.value {
                    check(name, m.server.pos, &agent.name, "server");
                }
            }
            AgentKind::Llm(l) => {
                for (i, t) in l.mcp_tools.iter().enumerate() {
                    check(&t.server.value, t.server.pos, &agent.name, &format!("tools[{i}].mcp"));
                }
            }
            _ => {}
        }
    }
}
