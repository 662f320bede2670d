//! Building a validated spec with the same builders Rust users call (`Compute`, `Sequence`, `Loop`, ...).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use agentic_agents::a2a::{A2aAgent, A2aClient, A2aTenant};
use agentic_agents::{ApprovalRequest, Expression};
use agentic_agents::{Compute, Deadline, Human, HumanMode, OnTimeout, Wait};
#[cfg(feature = "mcp")]
use agentic_agents::{McpAgent, McpClient, McpServer, McpToolProvider};
use agentic_engine::{
    AgentRef, AgentRegistry, BuildError, ErrorContext, RegistryError, RetryPolicy, SpecBuilder, Transience,
};
use agentic_planners::{CompositeBuilderExt, CompositeParts};
use serde_json::Value;

use crate::error::Sink;
use crate::kind::{FieldType, KindArgs, KindField, ModelUse};
#[cfg(feature = "mcp")]
use crate::model::McpServerDef;
use crate::model::{
    AgentDef, AgentKind, ApproveDef, ComputeBody, DeadlineDef, FieldValue, Located, McpServerEntry, ModelField,
    OnTimeoutDef, PlannerDef, WaitDef,
};
use crate::validate::expr_message;

/// The variable a `choose` expression reads the run's usage so far from (SPEC.md §7;
/// [`agentic_agents::model::usage_value`]): `usage.cost_usd`, `usage.tokens`, `usage.by_model.strong.tokens`.
pub const CHOICE_USAGE: &str = "usage";

/// Builds agents by name, recursively; errors go to the sink at the agent's position.
pub(crate) struct Builder<'a> {
    agents: &'a [AgentDef],
    by_name: HashMap<&'a str, &'a AgentDef>,
    /// The agent definitions, owned, once a kind may ask what they mention ([`KindArgs::mentions`]).
    owned: Option<Arc<HashMap<String, AgentDef>>>,
    in_progress: HashSet<String>,
    sink: &'a mut Sink,
    /// Chat models by name (`models` section), or why one could not be built.
    models: HashMap<String, Result<agentic_agents::model::ChatModelRef, String>>,
    /// Decision models by name (scripted `decisions`); other models are chat models used as decision models.
    decision_models: HashMap<String, agentic_agents::decision::DecisionModelRef>,
    /// The `mcp_servers` of the spec, and the client of each once an agent uses it (one per built spec).
    mcp_servers: &'a [McpServerEntry],
    #[cfg(feature = "mcp")]
    mcp_clients: HashMap<String, Arc<McpClient>>,
    /// The agents `registry` agents refer to (none: such an agent is an error).
    registry: Option<AgentRegistry>,
    /// Each spec agent's path in the built tree (`root/1/0`), for errors.
    paths: HashMap<String, String>,
    /// Whether secrets' references are resolved (a build to run); else they are left as written (a build
    /// for the topology, or for a server that runs the spec with its own secrets).
    resolve: bool,
}

/// A failure already recorded in the sink.
pub(crate) struct Reported;

type Built = Result<AgentRef, Reported>;

impl<'a> Builder<'a> {
    pub(crate) fn with_mcp_servers(mut self, servers: &'a [McpServerEntry]) -> Self {
        self.mcp_servers = servers;
        self
    }

    pub(crate) fn new(agents: &'a [AgentDef], sink: &'a mut Sink) -> Self {
        Builder {
            agents,
            by_name: agents.iter().map(|a| (a.name.as_str(), a)).collect(),
            owned: None,
            in_progress: HashSet::new(),
            sink,
            models: HashMap::new(),
            decision_models: HashMap::new(),
            mcp_servers: &[],
            #[cfg(feature = "mcp")]
            mcp_clients: HashMap::new(),
            registry: None,
            paths: HashMap::new(),
            resolve: true,
        }
    }

    /// Leaves secrets' references unresolved (`${secret:NAME}` as written): a build that runs nothing.
    pub(crate) fn without_secrets(mut self, without: bool) -> Self {
        self.resolve = !without;
        self
    }

    /// Sets the registry `registry` agents are looked up in, and the spec agents' paths (for its errors).
    pub(crate) fn with_registry(mut self, registry: Option<AgentRegistry>, paths: HashMap<String, String>) -> Self {
        self.registry = registry;
        self.paths = paths;
        self
    }

    /// The human agent of `def` (a `human` kind), with its deadline and what happens at it; an escalation's
    /// target is built the same way (its own deadline applies).
    fn human(&mut self, def: &'a AgentDef) -> Result<Human, Reported> {
        let AgentKind::Human { prompt, pending_mode, response_id, deadline, on_timeout } = &def.kind else {
            self.sink.push(def.pos, Some(&def.name), None, "not a human agent");
            return Err(Reported);
        };
        let mut b = match Human::builder(def.name.clone(), &prompt.value) {
            Ok(b) => b,
            Err(e) => {
                let message = format!("invalid template: {}", expr_message(&e));
                self.sink.push(prompt.pos, Some(&def.name), Some("prompt"), message);
                return Err(Reported);
            }
        };
        if *pending_mode {
            b = b.mode(HumanMode::Pending);
        }
        if let Some(id) = response_id {
            b = b.response_id(id.clone());
        }
        if let Some(deadline) = deadline {
            b = b.deadline(match &deadline.value {
                DeadlineDef::After(ms) => Deadline::After(Duration::from_millis(*ms)),
                DeadlineDef::At(text) => {
                    Deadline::At(self.time_expression(def, "deadline", &Located::new(text.clone(), deadline.pos))?)
                }
            });
        }
        match on_timeout.as_ref().map(|t| &t.value) {
            None | Some(OnTimeoutDef::Fail) => {}
            Some(OnTimeoutDef::Default(expr)) => match Expression::compile(&expr.value) {
                Ok(e) => b = b.on_timeout(OnTimeout::Default(e)),
                Err(e) => {
                    let message = format!("invalid `default` expression: {}", expr_message(&e));
                    self.sink.push(expr.pos, Some(&def.name), Some("on_timeout"), message);
                    return Err(Reported);
                }
            },
            Some(OnTimeoutDef::Escalate(name)) => {
                let target = match self.by_name.get(name.value.as_str()).copied() {
                    Some(t) if matches!(t.kind, AgentKind::Human { .. }) => t,
                    Some(t) => {
                        let message = format!(
                            "`on_timeout` escalates to `{}`, a {} agent: it must name a human agent",
                            name.value,
                            t.kind.name()
                        );
                        self.sink.push(name.pos, Some(&def.name), Some("on_timeout"), message);
                        return Err(Reported);
                    }
                    None => {
                        let message =
                            format!("`on_timeout` escalates to `{}`, which is no agent of the spec", name.value);
                        self.sink.push(name.pos, Some(&def.name), Some("on_timeout"), message);
                        return Err(Reported);
                    }
                };
                if !self.in_progress.insert(target.name.clone()) {
                    let message = format!("escalations go round in a cycle through `{}`", target.name);
                    self.sink.push(name.pos, Some(&def.name), Some("on_timeout"), message);
                    return Err(Reported);
                }
                let next = self.human(target);
                self.in_progress.remove(&target.name);
                b = b.on_timeout(OnTimeout::Escalate(Arc::new(next?)));
            }
        }
        Ok(common(b, def).into_human())
    }

    /// A time written in `field` of `def`: an RFC 3339 time, or an expression over the state giving one.
    fn time_expression(&mut self, def: &AgentDef, field: &str, text: &Located<String>) -> Result<Expression, Reported> {
        let t = text.value.trim();
        if field == "until" && crate::parse::parse_duration(t).is_ok() {
            let message = format!("`until` takes a time; a duration goes in `for` (`for: {t}`)");
            self.sink.push(text.pos, Some(&def.name), Some(field), message);
            return Err(Reported);
        }
        // Written like a date (`2026-…`): an RFC 3339 time, or an error saying what is wrong with it.
        let dated = t.len() > 4 && t.as_bytes()[..4].iter().all(u8::is_ascii_digit) && t.as_bytes()[4] == b'-';
        let source = match agentic_engine::parse_rfc3339_ms(t) {
            Ok(_) => format!("'{t}'"),
            Err(message) if dated => {
                self.sink.push(text.pos, Some(&def.name), Some(field), message);
                return Err(Reported);
            }
            Err(_) => text.value.clone(),
        };
        Expression::compile(&source).map_err(|e| {
            let message = format!(
                "`{}` is neither a duration (\"90s\", \"2h\"), an RFC 3339 time, nor a valid expression: {}",
                text.value,
                expr_message(&e)
            );
            self.sink.push(text.pos, Some(&def.name), Some(field), message);
            Reported
        })
    }

    /// Builds agent `name` and everything below it.
    pub(crate) fn build(&mut self, name: &Located<String>, parent: Option<&str>) -> Built {
        let Some(def) = self.by_name.get(name.value.as_str()).copied() else {
            self.sink.push(name.pos, parent, None, format!("unknown agent `{}`", name.value));
            return Err(Reported);
        };
        if !self.in_progress.insert(def.name.clone()) {
            self.sink.push(name.pos, parent, None, format!("cycle through agent `{}`", def.name));
            return Err(Reported);
        }
        let built = self.build_def(def);
        self.in_progress.remove(&def.name);
        built
    }

    fn build_def(&mut self, def: &'a AgentDef) -> Built {
        match &def.kind {
            AgentKind::Compute(body) => self.compute(def, body),
            AgentKind::Human { .. } => self.human(def).map(AgentRef::new),
            AgentKind::Wait(wait) => {
                let b = match wait {
                    WaitDef::For(ms) => Wait::duration(def.name.clone(), Duration::from_millis(*ms)),
                    WaitDef::Until(until) => Wait::until(def.name.clone(), self.time_expression(def, "until", until)?),
                };
                Ok(common(b, def).build())
            }
            AgentKind::Llm(llm) => self.llm(def, llm),
            #[cfg(not(feature = "mcp"))]
            AgentKind::Mcp(mcp) => Err(self.no_mcp(mcp.server.pos, &def.name, "server")),
            #[cfg(feature = "mcp")]
            AgentKind::Mcp(mcp) => {
                let client = match &mcp.server.value {
                    McpServerDef::Named { name } => self.mcp_client(name, mcp.server.pos, &def.name, "server")?,
                    _ => {
                        let (server, credentials) = self.mcp_server(&mcp.server, Some(&def.name), "server")?;
                        McpClient::with_credentials(def.name.clone(), server, credentials)
                    }
                };
                let mut b = McpAgent::builder(client).name(def.name.clone()).effect(mcp.effect);
                if let Some(tool) = &mcp.tool {
                    b = b.tool_name(tool.value.clone());
                }
                Ok(common(b, def).build_lazy())
            }
            AgentKind::A2a(a2a) => {
                let (headers, redactions) = self.resolve_secrets(&a2a.headers, Some(&def.name), "headers")?;
                let client = if headers.is_empty() {
                    A2aClient::new(def.name.clone(), a2a.url.value.clone())
                } else {
                    A2aClient::with_headers(def.name.clone(), a2a.url.value.clone(), &headers, redactions).map_err(
                        |e| {
                            self.sink.push(a2a.url.pos, Some(&def.name), Some("headers"), e);
                            Reported
                        },
                    )?
                };
                let mut b = A2aAgent::builder(client).name(def.name.clone()).streaming(a2a.stream);
                if let Some(t) = &a2a.tenant {
                    b = b.tenant(A2aTenant::Fixed(t.value.clone()));
                }
                if let Some(k) = &a2a.tenant_key {
                    b = b.tenant(A2aTenant::FromKey(k.value.clone()));
                }
                if let Some(k) = &a2a.context_key {
                    b = b.context_key(k.value.clone());
                }
                if let Some(k) = &a2a.task_key {
                    b = b.task_key(k.value.clone());
                }
                if let Some(m) = &a2a.message {
                    b = match b.message(&m.value) {
                        Ok(b) => b,
                        Err(e) => {
                            self.sink.push(
                                m.pos,
                                Some(&def.name),
                                Some("message"),
                                format!("invalid template: {}", expr_message(&e)),
                            );
                            return Err(Reported);
                        }
                    };
                }
                Ok(common(b, def).build_lazy())
            }
            AgentKind::Registry { name } => self.registered(def, name),
            AgentKind::Planner(planned) => self.planned(def, planned),
            AgentKind::Unsupported(kind) => {
                self.sink.push(
                    def.kind_pos,
                    Some(&def.name),
                    None,
                    format!("kind `{kind}` is not supported yet by this build"),
                );
                Err(Reported)
            }
        }
    }

    /// An agent whose kind a descriptor defines: its sub-agents numbered in the kind's field order (a list's
    /// entries in order), its expressions compiled, its models resolved, its values checked by the kind, its
    /// composite built by the kind.
    fn planned(&mut self, def: &AgentDef, planned: &PlannerDef) -> Built {
        let kind = planned.kind.descriptor();
        // Where the agents of each of the kind's agent fields start among the sub-agents (`AgentOf` fields).
        let mut starts: HashMap<&str, (Vec<&str>, usize)> = HashMap::new();
        let mut count = 0;
        for (field, value) in &planned.fields {
            let refs = value.references();
            if matches!(value, FieldValue::Agents(_) | FieldValue::Agent(_)) {
                starts.insert(field.as_str(), (refs.iter().map(|r| r.value.as_str()).collect(), count));
            }
            count += refs.len();
        }
        let mut built = Planned { subs: Vec::new(), names: Vec::new(), failed: false };
        let mut args = self.kind_args(def, kind.fields(), &planned.fields, "", &starts, &mut built);
        if built.failed {
            return Err(Reported);
        }
        args.set_sub_agents(built.subs.len());
        let defs = self.owned_defs();
        let names = built.names;
        args.set_mentions(move |i, key| names.get(i).and_then(|n| mentioned_under(&defs, n, key, &mut HashSet::new())));
        if let Err(e) = kind.check(&args, &built.subs) {
            let pos = planned.locate(&e.field).unwrap_or(def.pos);
            self.sink.push(pos, Some(&def.name), Some(&e.field), e.message);
            return Err(Reported);
        }
        let parts = composite(CompositeParts::new(kind.name()), def, self)?.sub_agents(built.subs);
        let built = kind.build(&args, parts);
        self.finish(def, built)
    }

    /// The arguments of the `values` of the `declared` fields (a kind's, or one entry's of a list field at
    /// `prefix`), the sub-agents they name built and appended to `built`.
    fn kind_args(
        &mut self,
        def: &AgentDef,
        declared: &[KindField],
        values: &[(String, FieldValue)],
        prefix: &str,
        starts: &HashMap<&str, (Vec<&str>, usize)>,
        built: &mut Planned,
    ) -> KindArgs {
        let mut args = KindArgs::new();
        for (field, value) in values {
            let path = if prefix.is_empty() { field.clone() } else { format!("{prefix}.{field}") };
            let ty = declared.iter().find(|d| d.name == field).map(|d| (d.ty, d.by_name));
            match value {
                FieldValue::Agents(names) => {
                    let subs = match ty {
                        Some((_, true)) => self.named_children(def, &path, names),
                        _ => self.children(def, names),
                    };
                    match subs {
                        Ok(subs) => {
                            let first = built.subs.len();
                            args.set_agents(field.clone(), (first..first + subs.len()).collect());
                            built.names.extend(names.iter().map(|n| n.value.clone()));
                            built.subs.extend(subs);
                        }
                        Err(Reported) => built.failed = true,
                    }
                }
                FieldValue::Agent(name) => match self.build(name, Some(&def.name)) {
                    Ok(sub) => {
                        args.set_agents(field.clone(), vec![built.subs.len()]);
                        built.names.push(name.value.clone());
                        built.subs.push(sub);
                    }
                    Err(Reported) => built.failed = true,
                },
                FieldValue::Value(v) => args.set_value(field.clone(), v.value.clone()),
                FieldValue::Expression(src) => match self.expression(def, &path, src) {
                    Ok(e) => {
                        args.set_expression(field.clone(), e);
                        args.set_value(field.clone(), Value::String(src.value.clone()));
                    }
                    Err(Reported) => built.failed = true,
                },
                FieldValue::List(entries) => {
                    let inner = match ty {
                        Some((FieldType::List(inner), _)) => inner,
                        _ => &[],
                    };
                    let entries = entries
                        .iter()
                        .enumerate()
                        .map(|(i, e)| self.kind_args(def, inner, &e.fields, &format!("{path}[{i}]"), starts, built))
                        .collect();
                    args.set_entries(field.clone(), entries);
                }
                FieldValue::AgentOf(name) => {
                    // Validation checked that the name is one of that field's agents.
                    let of = match ty {
                        Some((FieldType::AgentOf(of), _)) => starts.get(of),
                        _ => None,
                    };
                    if let Some((names, start)) = of
                        && let Some(i) = names.iter().position(|n| *n == name.value)
                    {
                        args.set_agents(field.clone(), vec![start + i]);
                    }
                    args.set_value(field.clone(), Value::String(name.value.clone()));
                }
                FieldValue::Model(model) => {
                    let used = match ty {
                        Some((FieldType::Model(used), _)) => used,
                        _ => ModelUse::Chat,
                    };
                    args.set_value(field.clone(), Value::String(model.name.value.clone()));
                    // A decision model is one when any model it may be is a scripted decision model.
                    let decision = match used {
                        ModelUse::Decision => self.decision_model(def, &path, model),
                        _ => Ok(None),
                    };
                    match decision {
                        Ok(Some(m)) => args.set_decision_model(field.clone(), m),
                        Ok(None) => match self.chat_model(def, &path, model) {
                            Ok(m) => args.set_chat_model(field.clone(), m),
                            Err(Reported) => built.failed = true,
                        },
                        Err(Reported) => built.failed = true,
                    }
                }
            }
        }
        args
    }

    /// The agent definitions, owned (shared with the kinds that ask what an agent mentions).
    fn owned_defs(&mut self) -> Arc<HashMap<String, AgentDef>> {
        let agents = self.agents;
        self.owned.get_or_insert_with(|| Arc::new(agents.iter().map(|a| (a.name.clone(), a.clone())).collect())).clone()
    }

    /// The agent registered under `name` (a `registry` agent).
    fn registered(&mut self, def: &AgentDef, name: &Located<String>) -> Built {
        let at = match self.paths.get(&def.name) {
            Some(path) => format!(" at {path}"),
            None => String::new(),
        };
        let message = match &self.registry {
            None => format!(
                "kind `registry` needs an agents registry, and this spec was built without one (the Rust program \
                 that registers agents builds the spec with `BuildContext::registry`); `{}`{at} is not resolved",
                name.value
            ),
            Some(registry) => match registry.get(&name.value) {
                Ok(agent) => return Ok(agent),
                Err(RegistryError::Unknown { registered, .. }) => {
                    let list = agentic_engine::registered_list(&registered);
                    format!("no agent registered as `{}`{at} ({list})", name.value)
                }
                Err(other) => format!("`{}`{at}: {other}", name.value),
            },
        };
        self.sink.push(name.pos, Some(&def.name), Some("name"), message);
        Err(Reported)
    }

    fn compute(&mut self, def: &AgentDef, body: &ComputeBody) -> Built {
        let (field, src, made) = match body {
            ComputeBody::Value(src) => ("value", src, Compute::expression(def.name.clone(), &src.value)),
            ComputeBody::Template(src) => ("template", src, Compute::template(def.name.clone(), &src.value)),
        };
        match made {
            Ok(b) => Ok(common(b, def).build()),
            Err(e) => {
                self.sink.push(src.pos, Some(&def.name), Some(field), format!("invalid {field}: {}", expr_message(&e)));
                Err(Reported)
            }
        }
    }

    /// Builds every child, reporting all failures before giving up.
    fn children(&mut self, def: &AgentDef, names: &[Located<String>]) -> Result<Vec<AgentRef>, Reported> {
        let mut out = Vec::with_capacity(names.len());
        let mut failed = false;
        for n in names {
            match self.build(n, Some(&def.name)) {
                Ok(a) => out.push(a),
                Err(Reported) => failed = true,
            }
        }
        if failed { Err(Reported) } else { Ok(out) }
    }

    /// The sub-agents of a field whose agents the planner chooses by name ([`KindField::by_name`]: a
    /// supervisor's, a decision router's): two entries that are one agent (a registry alias, an agent listed
    /// twice) are an error at the second one, naming both.
    fn named_children(
        &mut self,
        def: &AgentDef,
        field: &str,
        names: &[Located<String>],
    ) -> Result<Vec<AgentRef>, Reported> {
        let subs = self.children(def, names)?;
        let mut failed = false;
        for (i, (sub, entry)) in subs.iter().zip(names).enumerate() {
            let first = subs[..i].iter().zip(names).find(|(other, _)| other.name() == sub.name());
            if let Some((_, earlier)) = first {
                let message = format!(
                    "`{}` is the agent named `{}`, as `{}` is: a {} chooses its sub-agents by name, so each must be \
                     another agent",
                    entry.value,
                    sub.name(),
                    earlier.value,
                    def.kind.name()
                );
                self.sink.push(entry.pos, Some(&def.name), Some(field), message);
                failed = true;
            }
        }
        if failed { Err(Reported) } else { Ok(subs) }
    }

    fn expression(&mut self, def: &AgentDef, field: &str, src: &Located<String>) -> Result<Arc<Expression>, Reported> {
        Expression::compile(&src.value).map(Arc::new).map_err(|e| {
            self.sink.push(src.pos, Some(&def.name), Some(field), format!("invalid expression: {}", expr_message(&e)));
            Reported
        })
    }

    fn finish(&mut self, def: &AgentDef, built: Result<AgentRef, BuildError>) -> Built {
        built.map_err(|e| {
            let message = match e {
                BuildError::Invalid { message, .. } => message,
                other => other.to_string(),
            };
            self.sink.push(def.pos, Some(&def.name), None, message);
            Reported
        })
    }
}

/// Applies the common fields (SPEC.md §1) to any builder.
fn common<B: SpecBuilder>(mut b: B, def: &AgentDef) -> B {
    b = b.description(def.description.clone()).optional(def.optional).asynchronous(def.is_async);
    if let Some(key) = &def.output_key {
        b = b.output_key(key.clone());
    }
    if let Some(inputs) = &def.inputs {
        // An input the agent's templates read only through `default(..)` or under `is defined` stays optional
        // when `inputs` lists it too.
        let optional: Vec<String> = b.spec_mut().inputs.iter().filter(|i| i.optional).map(|i| i.key.clone()).collect();
        b = b.inputs(inputs.iter().map(|i| {
            let is_optional = optional.contains(&i.value);
            agentic_engine::InputSpec::new(i.value.clone()).optional(is_optional)
        }));
    }
    if let Some(ms) = def.timeout_ms {
        b = b.timeout(Duration::from_millis(ms));
    }
    if let Some(budget) = &def.budget {
        b = b.budget(budget.value);
    }
    b
}

/// Applies the common and composite fields (`name`, `output`, `error_handler`) to a composite builder.
fn composite<B: SpecBuilder + CompositeBuilderExt>(
    b: B,
    def: &AgentDef,
    builder: &mut Builder<'_>,
) -> Result<B, Reported> {
    let mut b = common(b.name(def.name.clone()), def);
    let Some(c) = &def.composite else { return Ok(b) };
    if let Some(src) = &c.output {
        let e = builder.expression(def, "output", src)?;
        b = b.output(move |view| e.eval(view, &[]));
    }
    if let Some(h) = &c.error_handler {
        let mut policy = RetryPolicy::new(h.retry, Duration::from_millis(h.backoff_ms));
        if !h.set.is_empty() {
            let mut repairs = Vec::with_capacity(h.set.len());
            for (key, src) in &h.set {
                repairs.push((key.clone(), builder.expression(def, &format!("error_handler.set.{key}"), src)?));
            }
            policy = policy.repair(move |ctx| repair_writes(&repairs, ctx));
        }
        if let Some(src) = &h.when {
            let e = builder.expression(def, "error_handler.when", src)?;
            policy = policy.when(move |ctx| e.eval_bool(ctx.view, &[("error", error_value(ctx))]));
        }
        if let Some(src) = &h.fallback {
            let e = builder.expression(def, "error_handler.fallback", src)?;
            policy = policy.fallback(move |view| e.eval(view, &[]));
        }
        b = b.error_handler(policy);
    }
    b = b.compensate_on_error(c.compensate_on_error);
    Ok(b)
}

/// The variable `error` error handler expressions see: `{kind, agent, path, message, cause, status,
/// transient}` (`cause`: `model`, `tool`, `store`, `remote` or null; `status`: the HTTP status or null;
/// `transient`: whether trying again can help, null when nothing says).
fn error_value(ctx: &ErrorContext<'_>) -> Value {
    let cause = ctx.error.cause();
    let transient = match ctx.error.transience() {
        Transience::Permanent => Value::Bool(false),
        Transience::Transient { .. } => Value::Bool(true),
        _ => Value::Null,
    };
    serde_json::json!({
        "kind": ctx.error.kind(),
        "agent": ctx.agent,
        "path": ctx.path,
        "message": ctx.error.to_string(),
        "cause": cause.map(|c| c.origin().as_str()),
        "status": cause.and_then(|c| c.status()),
        "transient": transient,
    })
}

/// The writes of an error handler's `set`: every expression evaluated over the state when the agent failed,
/// plus the variable `error` ([`error_value`]) (so one expression never sees another's value).
///
/// # Errors
/// The first expression that fails to evaluate, named by its key (the handler then fails the composite).
fn repair_writes(
    repairs: &[(String, Arc<Expression>)],
    ctx: &ErrorContext<'_>,
) -> Result<Vec<(String, Value)>, String> {
    let extra = [("error", error_value(ctx))];
    repairs
        .iter()
        .map(|(key, e)| match e.eval(ctx.view, &extra) {
            Ok(v) => Ok((key.clone(), v)),
            Err(m) => Err(format!("error_handler.set.{key}: {m}")),
        })
        .collect()
}

/// Whether the agent `name` or any agent under it mentions `key` as a whole word anywhere in its definition
/// (inputs, templates, expressions, prompts); `None` when one of them reads inputs the spec does not show (an
/// MCP tool's arguments, a registered agent).
fn mentioned_under(
    defs: &HashMap<String, AgentDef>,
    name: &str,
    key: &str,
    seen: &mut HashSet<String>,
) -> Option<bool> {
    if !seen.insert(name.to_string()) {
        return Some(false);
    }
    let def = defs.get(name)?;
    if matches!(def.kind, AgentKind::Mcp(_) | AgentKind::Registry { .. }) {
        return None;
    }
    let text = format!("{def:?}");
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let found = text
        .match_indices(key)
        .any(|(i, _)| !word(text[..i].chars().next_back()) && !word(text[i + key.len()..].chars().next()));
    let mut unknown = false;
    for sub in def.kind.references() {
        match mentioned_under(defs, &sub.value, key, seen) {
            Some(true) => return Some(true),
            Some(false) => {}
            None => unknown = true,
        }
    }
    if found {
        Some(true)
    } else if unknown {
        None
    } else {
        Some(false)
    }
}

impl Builder<'_> {
    /// Records that this build has no MCP (the cargo feature `mcp` is off) where the spec uses it.
    #[cfg(not(feature = "mcp"))]
    fn no_mcp(&mut self, pos: crate::node::Pos, agent: &str, field: &str) -> Reported {
        let msg = "MCP is not built into this program (cargo feature `mcp` of agentic or agentic-spec)";
        self.sink.push(pos, Some(agent), Some(field), msg.to_string());
        Reported
    }

    /// The client of the server `name` of `mcp_servers`, shared by every agent of the spec that uses it.
    #[cfg(feature = "mcp")]
    fn mcp_client(
        &mut self,
        name: &str,
        pos: crate::node::Pos,
        agent: &str,
        field: &str,
    ) -> Result<Arc<McpClient>, Reported> {
        if let Some(c) = self.mcp_clients.get(name) {
            return Ok(c.clone());
        }
        let Some(entry) = self.mcp_servers.iter().find(|s| s.name == name) else {
            // Reported by validation already; a spec built without it still gets a located error.
            self.sink.push(pos, Some(agent), Some(field), format!("unknown MCP server `{name}`"));
            return Err(Reported);
        };
        if let McpServerDef::Named { name: other } = &entry.server.value {
            let msg = format!("MCP server `{name}` is declared as another name (`{other}`)");
            self.sink.push(entry.server.pos, Some(agent), Some(field), msg);
            return Err(Reported);
        }
        // Its errors are the entry's, wherever it is used.
        let (server, credentials) = self.mcp_server(&entry.server, None, &format!("mcp_servers.{name}"))?;
        let client = McpClient::with_credentials(name, server, credentials);
        self.mcp_clients.insert(name.to_string(), client.clone());
        Ok(client)
    }

    /// How to reach the MCP server `def` describes (not a [`McpServerDef::Named`] one) and what its
    /// connections carry, its secrets resolved; errors are located at `field` (of `agent`, when the server is
    /// written in an agent).
    #[cfg(feature = "mcp")]
    fn mcp_server(
        &mut self,
        def: &Located<McpServerDef>,
        agent: Option<&str>,
        field: &str,
    ) -> Result<(McpServer, agentic_agents::McpCredentials), Reported> {
        let mut credentials = agentic_agents::McpCredentials::default();
        let server = match &def.value {
            McpServerDef::Stdio { command, env } => {
                (credentials.env, credentials.redactions) =
                    self.resolve_secrets(env, agent, &format!("{field}.env"))?;
                McpServer::Stdio { command: command.clone() }
            }
            McpServerDef::Http { url, headers } => {
                (credentials.headers, credentials.redactions) =
                    self.resolve_secrets(headers, agent, &format!("{field}.headers"))?;
                McpServer::Http { url: url.clone() }
            }
            McpServerDef::Named { name } => {
                let msg = format!("MCP server `{name}` is declared as another name");
                self.sink.push(def.pos, agent, Some(field), msg);
                return Err(Reported);
            }
        };
        Ok((server, credentials))
    }

    /// `pairs` with the secrets their values refer to (`${secret:NAME}`) resolved from the secrets of this
    /// process ([`crate::Secrets::installed`]), and the secrets used as a client's errors show them
    /// (`[secret:NAME]`); a secret that is not set, or a text that looks like a reference but is not one, is
    /// an error located at its value, naming it and `field.NAME` (of `agent`, if any).
    fn resolve_secrets(
        &mut self,
        pairs: &[(String, Located<String>)],
        agent: Option<&str>,
        field: &str,
    ) -> Result<(Vec<(String, String)>, agentic_agents::Redactions), Reported> {
        if pairs.is_empty() {
            return Ok((Vec::new(), agentic_agents::Redactions::default()));
        }
        if !self.resolve {
            let written = pairs.iter().map(|(name, value)| (name.clone(), value.value.clone())).collect();
            return Ok((written, agentic_agents::Redactions::default()));
        }
        let secrets = crate::Secrets::installed();
        let mut out = Vec::with_capacity(pairs.len());
        let mut shown = Vec::new();
        for (name, value) in pairs {
            let at = format!("{field}.{name}");
            if let Some(bad) = crate::malformed_secret_reference(&value.value) {
                let msg = format!(
                    "`{bad}` is not a secret's reference: write `${{secret:NAME}}`, NAME of letters, digits and `_`"
                );
                self.sink.push(value.pos, agent, Some(&at), msg);
                return Err(Reported);
            }
            match secrets.resolve_used(&value.value) {
                Ok((v, used)) => {
                    out.push((name.clone(), v));
                    shown.extend(used.into_iter().map(|(n, v)| (v, format!("[secret:{n}]"))));
                }
                Err(e) => {
                    self.sink.push(value.pos, agent, Some(&at), e.to_string());
                    return Err(Reported);
                }
            }
        }
        Ok((out, agentic_agents::Redactions::new(shown)))
    }

    pub(crate) fn with_models(
        mut self,
        models: HashMap<String, Result<agentic_agents::model::ChatModelRef, String>>,
    ) -> Self {
        self.models = models;
        self
    }

    fn llm(&mut self, def: &AgentDef, llm: &crate::model::LlmDef) -> Built {
        let model = self.chat_model(def, "model", &llm.model)?;
        let mut b = agentic_agents::LlmAgent::builder(model)
            .name(def.name.clone())
            .user(&llm.user.value)
            .output(llm.output.clone());
        if let Some(system) = &llm.system {
            b = b.system(&system.value);
        }
        if let Some(n) = llm.memory_window {
            b = b.memory_window(n);
        }
        // An empty list means every agent, for both kinds of context.
        if llm.has_context {
            let agents = llm.context.iter().map(|c| c.value.clone());
            b = if llm.context_summarized { b.summarized_context(agents) } else { b.conversation_context(agents) };
        }
        for (i, tool) in llm.tools.iter().enumerate() {
            match spec_tool(tool) {
                Ok(t) => b = b.tool(t),
                Err((field, src, e)) => {
                    let msg = expr_message(&e);
                    self.sink.push(src.pos, Some(&def.name), Some(&format!("tools[{i}].{field}")), msg);
                    return Err(Reported);
                }
            }
        }
        #[cfg(not(feature = "mcp"))]
        if let Some(t) = llm.mcp_tools.first() {
            return Err(self.no_mcp(t.server.pos, &def.name, "tools[0].mcp"));
        }
        #[cfg(feature = "mcp")]
        for (i, t) in llm.mcp_tools.iter().enumerate() {
            let client = self.mcp_client(&t.server.value, t.server.pos, &def.name, &format!("tools[{i}].mcp"))?;
            let mut p = McpToolProvider::builder().client(client);
            if let Some(filter) = &t.filter {
                p = p.filter_tool_names(filter.iter().map(|n| n.value.clone()));
            }
            for (from, to) in &t.rename {
                p = p.rename(from.clone(), to.value.clone());
            }
            p = p.effect(t.effect);
            match approval_rule(&t.approve) {
                Ok(Some(rule)) => p = p.approve_checked(move |call| rule(call)),
                Ok(None) => {}
                Err((src, e)) => {
                    let msg = expr_message(&e);
                    self.sink.push(src.pos, Some(&def.name), Some(&format!("tools[{i}].approve")), msg);
                    return Err(Reported);
                }
            }
            b = b.tool_provider(p.build());
        }
        if let Some(n) = llm.max_tool_iterations {
            b = b.max_tool_iterations(n);
        }
        if llm.stream {
            b = b.streaming(true);
        }
        if let Some(key) = &llm.confidence_key {
            b = b.confidence_key(key.value.clone());
        }
        if let Some(key) = &llm.scores_key {
            b = b.scores_key(key.value.clone());
        }
        if let Some(choice) = &llm.tool_choice {
            b = b.tool_choice(choice.clone());
        }
        if let Some(t) = llm.temperature {
            b = b.temperature(t);
        }
        if let Some(n) = llm.max_tokens {
            b = b.max_tokens(n);
        }
        let built = common(b, def).build();
        self.finish(def, built)
    }
}

/// The rule of a tool entry's `approve` (SPEC.md §4): `None` when no call waits; for an expression, a call
/// waits when it is truthy with the call's arguments as `args` and the tool's name as `tool` (both shadowing
/// the calling invocation's inputs, which shadow state keys). Its evaluation error, or an undefined value
/// (a name that is none of these), is the rule's error (the invocation fails).
///
/// # Errors
/// The expression's source and its compile error.
pub(crate) fn approval_rule(
    approve: &ApproveDef,
) -> Result<Option<ApprovalRule>, (&Located<String>, agentic_agents::ExprError)> {
    match approve {
        ApproveDef::Never => Ok(None),
        ApproveDef::Always => Ok(Some(Arc::new(|_: &ApprovalRequest<'_>| Ok(true)))),
        ApproveDef::When(src) => {
            let expr = Expression::compile(&src.value).map_err(|e| (src, e))?;
            Ok(Some(Arc::new(move |call: &ApprovalRequest<'_>| {
                // Variables: the state, the invocation's inputs over it, `args` and `tool` over those (the
                // first match of `extra` wins).
                let mut extra = vec![("args", call.args.clone()), ("tool", Value::String(call.tool.to_string()))];
                if let Some(inputs) = call.inputs {
                    extra.extend(inputs.iter().map(|(k, v)| (k.as_str(), v.clone())));
                }
                match expr.eval_bool_defined(call.state, &extra) {
                    Ok(Some(b)) => Ok(b),
                    Ok(None) => Err(format!(
                        "`{}` is undefined: name a state key, an input, `args.<name>` or `tool`; write `approve: \
                         true` to ask every time",
                        expr.source()
                    )),
                    Err(e) => Err(format!("`approve` ({}): {e}", expr.source())),
                }
            })))
        }
    }
}

/// A compiled `approve` rule ([`approval_rule`]).
pub(crate) type ApprovalRule = Arc<dyn Fn(&ApprovalRequest<'_>) -> Result<bool, String> + Send + Sync>;

/// A spec tool: its expression (or template) evaluated over the state, with the calling invocation's inputs
/// over it and the model's arguments over those as variables; its parameters admit no other argument. An
/// evaluation error is the tool's error (the model sees it and may call again). It has the entry's `effect`
/// and `approve` rule.
///
/// # Errors
/// The field (`value`, `template`, `approve`) whose source does not compile, that source and the error.
pub(crate) fn spec_tool(
    def: &crate::model::ToolDef,
) -> Result<agentic_agents::Tool, (&'static str, &Located<String>, agentic_agents::ExprError)> {
    use agentic_agents::Template;
    enum Body {
        Value(Expression),
        Template(Template),
    }
    let body = Arc::new(match &def.body {
        ComputeBody::Value(v) => Body::Value(Expression::compile(&v.value).map_err(|e| ("value", v, e))?),
        ComputeBody::Template(t) => Body::Template(Template::compile(&t.value).map_err(|e| ("template", t, e))?),
    });
    let approve = approval_rule(&def.approve).map_err(|(src, e)| ("approve", src, e))?;
    let properties: serde_json::Map<String, Value> = def.parameters.iter().cloned().collect();
    let required: Vec<&String> = def.parameters.iter().map(|(n, _)| n).collect();
    let schema = serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    let tool = agentic_agents::Tool::from_json_with_call(
        def.name.value.clone(),
        def.description.clone(),
        schema,
        move |call, args| {
            let body = body.clone();
            async move {
                // Variables: the state, the invocation's inputs over it, the arguments over those (the first
                // match of `extra` wins).
                let mut extra: Vec<(&str, Value)> = match &args {
                    Value::Object(m) => m.iter().map(|(k, v)| (k.as_str(), v.clone())).collect(),
                    Value::Null => Vec::new(),
                    other => return Err(format!("the arguments must be a JSON object, found {other}")),
                };
                extra.extend(call.inputs.iter().map(|(k, v)| (k.as_str(), v.clone())));
                match body.as_ref() {
                    Body::Value(e) => e.eval(&call.state, &extra),
                    Body::Template(t) => t.render(&call.state, &extra).map(Value::String),
                }
            }
        },
    )
    .effect(def.effect);
    Ok(match (&def.approve, approve) {
        (ApproveDef::Always, _) => tool.approve_always(),
        (_, Some(rule)) => tool.approve_checked(move |call| rule(call)),
        (_, None) => tool,
    })
}

/// The sub-agents of a described composite as they are built: the agents, their names in the spec, and
/// whether one of them (or a value) failed.
struct Planned {
    subs: Vec<AgentRef>,
    names: Vec<String>,
    failed: bool,
}

/// The models of the described kinds' model fields.
impl<'a> Builder<'a> {
    /// Sets the decision models by name: `scripted` entries with `decisions` (the other entries are chat
    /// models wrapped as decision models).
    pub(crate) fn with_decision_models(
        mut self,
        models: HashMap<String, agentic_agents::decision::DecisionModelRef>,
    ) -> Self {
        self.decision_models = models;
        self
    }

    /// The chat model named `model`, or the error reported at the agent's field `field`.
    /// The chat model of a `model` field: the named entry's, or a choice among every entry's (SPEC.md §7).
    fn chat_model(
        &mut self,
        def: &AgentDef,
        field: &str,
        model: &ModelField,
    ) -> Result<agentic_agents::model::ChatModelRef, Reported> {
        use agentic_agents::model::{ChatModelRef, ModelChoice};
        let Some(choose) = &model.choose else { return self.named_chat_model(def, field, &model.name) };
        let chooser = self.chooser(def, field, choose)?;
        // The default must build; the others are there to be chosen when they build (a name whose model did not
        // build is refused at run time, naming the models there are).
        self.named_chat_model(def, field, &model.name)?;
        let mut choice = ModelChoice::with(model.name.value.clone(), chooser.0, chooser.1);
        for (name, m) in self.built_models() {
            choice = choice.model(name, m);
        }
        Ok(ChatModelRef::choosing(choice))
    }

    /// The decision model of a decision router's `model` field, when it is one: the named entry's when that
    /// is a scripted decision model; for a choice, a choice among every entry (each a decision model, or a chat
    /// model asked as one) when any of them is. `None`: the field's chat model is asked as a decision model.
    fn decision_model(
        &mut self,
        def: &AgentDef,
        field: &str,
        model: &ModelField,
    ) -> Result<Option<agentic_agents::decision::DecisionModelRef>, Reported> {
        use agentic_agents::decision::DecisionModelRef;
        use agentic_agents::model::ModelChoice;
        let Some(choose) = &model.choose else { return Ok(self.decision_models.get(&model.name.value).cloned()) };
        if self.decision_models.is_empty() {
            return Ok(None);
        }
        let chooser = self.chooser(def, field, choose)?;
        if !self.decision_models.contains_key(&model.name.value) {
            self.named_chat_model(def, field, &model.name)?;
        }
        let mut choice = ModelChoice::with(model.name.value.clone(), chooser.0, chooser.1);
        for (name, m) in self.built_models() {
            let decision = match self.decision_models.get(&name) {
                Some(d) => d.clone(),
                None => DecisionModelRef::from(m),
            };
            choice = choice.model(name, decision);
        }
        Ok(Some(DecisionModelRef::choosing(choice)))
    }

    /// The spec's models that built, by name in name order: what a choice chooses among.
    fn built_models(&self) -> Vec<(String, agentic_agents::model::ChatModelRef)> {
        let mut built: Vec<(String, agentic_agents::model::ChatModelRef)> =
            self.models.iter().filter_map(|(n, m)| m.as_ref().ok().map(|m| (n.clone(), m.clone()))).collect();
        built.sort_by(|a, b| a.0.cmp(&b.0));
        built
    }

    /// The function of a `choose` expression (validated before the build) and whether it reads `usage`: its
    /// value at each invocation is the model's name (`null`: the default).
    fn chooser(
        &mut self,
        def: &AgentDef,
        field: &str,
        choose: &Located<String>,
    ) -> Result<(bool, agentic_agents::model::ChooseFn), Reported> {
        let expr = match Expression::compile(&choose.value) {
            Ok(e) => Arc::new(e),
            Err(e) => {
                let msg = format!("invalid expression: {}", expr_message(&e));
                self.sink.push(choose.pos, Some(&def.name), Some(&format!("{field}.choose")), msg);
                return Err(Reported);
            }
        };
        let reads_usage = expr.variables().iter().any(|v| v == CHOICE_USAGE);
        let chooser: agentic_agents::model::ChooseFn = Arc::new(move |view, inputs, usage| {
            let extra = if reads_usage { vec![(CHOICE_USAGE.to_string(), usage.clone())] } else { Vec::new() };
            match expr.eval_inputs_with(view, inputs, extra)? {
                Value::Null => Ok(None),
                Value::String(name) => Ok(Some(name)),
                other => Err(format!("`{}` gave {other}, not a model name", expr.source())),
            }
        });
        Ok((reads_usage, chooser))
    }

    fn named_chat_model(
        &mut self,
        def: &AgentDef,
        field: &str,
        model: &Located<String>,
    ) -> Result<agentic_agents::model::ChatModelRef, Reported> {
        match self.models.get(&model.value) {
            Some(Ok(m)) => Ok(m.clone()),
            Some(Err(e)) => {
                let msg = format!("model `{}`: {e}", model.value);
                self.sink.push(model.pos, Some(&def.name), Some(field), msg);
                Err(Reported)
            }
            None => {
                let msg = format!("unknown model `{}`", model.value);
                self.sink.push(model.pos, Some(&def.name), Some(field), msg);
                Err(Reported)
            }
        }
    }
}

#[cfg(all(test, not(feature = "mcp")))]
mod without_mcp {
    /// A program built without MCP refuses an `mcp` agent at build time, naming the feature and the place.
    #[test]
    fn an_mcp_agent_is_refused_naming_the_feature() {
        let yaml = "version: 1\nroot: m\nagents:\n  m: { kind: mcp, server: { url: \"http://127.0.0.1:1/mcp\" } }\n";
        let spec = crate::Spec::parse(yaml, "spec.yaml").expect("a valid spec");
        let errors = spec.build().err().expect("refused").to_string();
        assert_eq!(
            errors,
            "spec.yaml:4:27: agent `m`: field `server`: MCP is not built into this program (cargo feature `mcp` of \
             agentic or agentic-spec)"
        );
    }
}

#[cfg(test)]
mod tool_rules {
    use agentic_agents::{ApprovalRequest, Tool};
    use agentic_engine::{Effect, ScopeView};
    use serde_json::{Value, json};

    use crate::model::AgentKind;

    const SPEC: &str = r#"version: 1
root: desk
models:
  default: { provider: scripted }
agents:
  desk:
    kind: llm
    user: hi
    tools:
      - name: lookup
        value: "1"
      - name: refund
        parameters: { amount: number }
        value: amount
        effect: once
        approve: "args.amount > limit or tool == 'wire'"
      - name: notify
        value: "1"
        effect: retry
        approve: true
      - name: quiet
        value: "1"
        effect: none
        approve: false
      - name: pay
        value: "1"
        approve: needs_review
      - name: send
        value: "1"
        approve: args.urgent
"#;

    /// The tools of agent `desk`, built from their entries.
    fn tools() -> Vec<Tool> {
        let spec = crate::Spec::parse(SPEC, "spec.yaml").expect("a valid spec");
        let Some(AgentKind::Llm(llm)) = spec.agent("desk").map(|a| &a.kind) else { panic!("an llm agent") };
        llm.tools.iter().map(|t| super::spec_tool(t).map_err(|(f, _, e)| format!("{f}: {e}")).expect("built")).collect()
    }

    fn needs(tool: &Tool, args: Value, state: Value) -> Result<bool, String> {
        let Value::Object(state) = state else { panic!("a state object") };
        let state = ScopeView::from_map(state);
        tool.needs_approval(&ApprovalRequest::new(tool.name(), &args, &state))
    }

    /// A built tool has its entry's effect (`none` when not written) and approval rule.
    #[test]
    fn a_spec_tool_has_its_effect_and_approval_rule() {
        let tools = tools();
        let effects: Vec<Effect> = tools.iter().map(Tool::side_effect).collect();
        assert_eq!(effects, [Effect::None, Effect::Once, Effect::Retry, Effect::None, Effect::None, Effect::None]);
        let rules: Vec<bool> = tools.iter().map(Tool::has_approval_rule).collect();
        assert_eq!(rules, [false, true, true, false, true, true]);

        let [lookup, refund, notify, quiet, ..] = &tools[..] else { panic!("four tools") };
        assert_eq!(needs(lookup, json!({}), json!({})), Ok(false));
        assert_eq!(needs(quiet, json!({}), json!({})), Ok(false));
        assert_eq!(needs(notify, json!({}), json!({})), Ok(true));
        // The expression sees the arguments as `args`, the tool's name as `tool` and the state keys.
        assert_eq!(needs(refund, json!({"amount": 150}), json!({"limit": 100})), Ok(true));
        assert_eq!(needs(refund, json!({"amount": 50}), json!({"limit": 100})), Ok(false));
        // `args` and `tool` shadow state keys of those names.
        assert_eq!(needs(refund, json!({"amount": 50}), json!({"limit": 10, "args": {"amount": 0}})), Ok(true));
        // An evaluation error is the rule's error, naming the expression.
        assert_eq!(
            needs(refund, json!({"amount": 50}), json!({})),
            Err("`approve` (args.amount > limit or tool == 'wire'): undefined value: `limit` is undefined (in \
                 <expression>:1)"
                .to_string())
        );
    }

    /// The invocation's inputs are variables of the rule, over the state and under `args` and `tool`.
    #[test]
    fn an_approval_rule_sees_the_inputs_over_the_state() {
        let tools = tools();
        let refund = &tools[1];
        let state = ScopeView::from_map(serde_json::Map::from_iter([("limit".to_string(), json!(10))]));
        let args = json!({"amount": 50});
        let inputs =
            serde_json::Map::from_iter([("limit".to_string(), json!(100)), ("tool".to_string(), json!("wire"))]);
        let asked = ApprovalRequest::new(refund.name(), &args, &state);
        assert_eq!(refund.needs_approval(&asked), Ok(true), "the state's limit");
        assert_eq!(refund.needs_approval(&asked.with_inputs(&inputs)), Ok(false), "the input's limit; `tool` wins");
    }

    /// An `approve` expression whose value is undefined (a missing name or argument) is the rule's error, not
    /// false.
    #[test]
    fn an_undefined_approval_rule_is_an_error() {
        let tools = tools();
        let (pay, send) = (&tools[4], &tools[5]);
        assert_eq!(
            needs(pay, json!({}), json!({})),
            Err("`needs_review` is undefined: name a state key, an input, `args.<name>` or `tool`; write `approve: \
                 true` to ask every time"
                .to_string())
        );
        assert_eq!(needs(pay, json!({}), json!({"needs_review": false})), Ok(false));
        assert_eq!(
            needs(send, json!({}), json!({})),
            Err("`args.urgent` is undefined: name a state key, an input, `args.<name>` or `tool`; write `approve: \
                 true` to ask every time"
                .to_string())
        );
        assert_eq!(needs(send, json!({"urgent": true}), json!({})), Ok(true));
    }
}
