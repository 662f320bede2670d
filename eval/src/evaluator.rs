//! The evaluators of SPEC.md §6 ([`Evaluator`]): read from a spec's `evals:` list or an evaluators file
//! ([`Evaluator::of_spec`], [`Evaluator::from_file`]), checked with their locations, and applied to what a
//! case's run gave ([`Observation`]).

use std::collections::HashMap;
use std::path::Path;

use agentic_agents::model::{ChatMessage, ChatModelRef, ChatRequest, ResponseFormat};
use agentic_agents::{Expression, Template};
use agentic_engine::ScopeView;
use agentic_spec::{EvalEntry, EvalField, Pos, Spec, SpecError, SpecErrors};
use serde_json::{Map, Value, json};

use crate::results::{EvalResult, RunUsage};

/// The evaluator kinds, as `kind:` names them.
pub const KINDS: [&str; 8] = ["equals", "contains", "regex", "schema", "expression", "trajectory", "judge", "cost"];

/// The variables of evaluator expressions and templates (`value`, `text`, `check`, `rubric`).
pub const VARIABLES: [&str; 7] = ["output", "expected", "inputs", "state", "trajectory", "usage", "latency_ms"];

/// The default `threshold` of `expression` scores and `judge` answers.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

/// The longest value a reason quotes, in characters (longer ones are cut with `…`).
const SHOWN_CHARS: usize = 80;

/// One evaluator: its name (`name`, default its kind, `kind#2` for the second of a kind) and what it checks.
#[derive(Debug)]
pub struct Evaluator {
    /// The name results are reported under.
    pub name: String,
    /// What it checks.
    pub check: Check,
    /// Where its entry starts.
    pub pos: Pos,
}

/// What an [`Evaluator`] checks, by kind (SPEC.md §6's table).
#[derive(Debug)]
#[non_exhaustive]
pub enum Check {
    /// `equals`: the value (`value`, an expression; default the output) equals `expected`.
    Equals {
        /// The expression compared; `None`: the output.
        value: Option<Expression>,
    },
    /// `contains`: the output as text contains `text` (a template; default `expected` as text).
    Contains {
        /// The text looked for; `None`: the expected value as text.
        text: Option<Template>,
        /// Compare without case.
        ignore_case: bool,
    },
    /// `regex`: the output as text matches `pattern`.
    Regex {
        /// The pattern.
        pattern: regex::Regex,
    },
    /// `schema`: the output is valid against the JSON schema.
    Schema {
        /// The compiled schema.
        validator: Box<jsonschema::Validator>,
    },
    /// `expression`: `check` is truthy, or a score in 0–1 that reaches `threshold`.
    Expression {
        /// The check.
        check: Expression,
        /// The score that passes.
        threshold: f64,
    },
    /// `trajectory`: the agents that ran (in the order they started).
    Trajectory {
        /// Agents that must have run.
        must_run: Vec<String>,
        /// Agents that must not have run.
        must_not_run: Vec<String>,
        /// Agents that must have run in this order (a subsequence of the trajectory).
        order: Vec<String>,
        /// The most invocations the run may make.
        max_steps: Option<u64>,
    },
    /// `judge`: the model `model` scores the rendered `rubric` (`{"score": 0–1, "reason": ..}`).
    Judge {
        /// The spec's model that judges.
        model: String,
        /// The rubric the judge gets.
        rubric: Template,
        /// The score that passes.
        threshold: f64,
    },
    /// `cost`: the run's usage is within every limit given.
    Cost {
        /// Most input plus output tokens.
        max_tokens: Option<u64>,
        /// Most model calls.
        max_model_calls: Option<u64>,
        /// Most cost in USD.
        max_cost_usd: Option<f64>,
    },
}

impl Check {
    /// The kind, as `kind:` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Check::Equals { .. } => "equals",
            Check::Contains { .. } => "contains",
            Check::Regex { .. } => "regex",
            Check::Schema { .. } => "schema",
            Check::Expression { .. } => "expression",
            Check::Trajectory { .. } => "trajectory",
            Check::Judge { .. } => "judge",
            Check::Cost { .. } => "cost",
        }
    }
}

/// What a case's run gave, as the evaluators see it (their variables).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// The run's output (`null` when it did not complete).
    pub output: Value,
    /// The case's expected value (`None` when the case has none).
    pub expected: Option<Value>,
    /// The run's inputs.
    pub inputs: Map<String, Value>,
    /// The run's final state.
    pub state: Map<String, Value>,
    /// The names of the agents invoked, in the order they started (composites included).
    pub trajectory: Vec<String>,
    /// What the run spent on models.
    pub usage: RunUsage,
    /// How long the run took, in milliseconds.
    pub latency_ms: u64,
}

impl Observation {
    /// The variables of expressions and templates ([`VARIABLES`]).
    fn variables(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("output", self.output.clone()),
            ("expected", self.expected.clone().unwrap_or(Value::Null)),
            ("inputs", Value::Object(self.inputs.clone())),
            ("state", Value::Object(self.state.clone())),
            ("trajectory", json!(self.trajectory)),
            ("usage", json!(self.usage)),
            ("latency_ms", json!(self.latency_ms)),
        ]
    }
}

/// The chat models the `judge` evaluators call, by their name in the spec's `models`.
#[derive(Clone, Default)]
pub struct Judges {
    models: HashMap<String, ChatModelRef>,
}

impl std::fmt::Debug for Judges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.models.keys().collect();
        names.sort();
        f.debug_struct("Judges").field("models", &names).finish()
    }
}

impl Judges {
    /// Builds the models the `judge` evaluators of `evaluators` name, from the spec's `models` entries, as
    /// the spec builds its own ([`agentic_spec::model_from_def`]).
    ///
    /// # Errors
    /// A model that cannot be built here (`provider: local` in a build without it), naming it and why.
    pub fn for_spec(spec: &Spec, evaluators: &[Evaluator]) -> Result<Judges, String> {
        let mut judges = Judges::default();
        for e in evaluators {
            let Check::Judge { model, .. } = &e.check else { continue };
            if judges.models.contains_key(model) {
                continue;
            }
            let def = spec.models().iter().find(|d| d.name == *model).ok_or_else(|| {
                format!("evaluator `{}`: the judge model `{model}` is not in the spec's `models`", e.name)
            })?;
            let built = agentic_spec::model_from_def(def)
                .map_err(|why| format!("evaluator `{}`: the judge model `{model}` cannot be built: {why}", e.name))?;
            judges.models.insert(model.clone(), built);
        }
        Ok(judges)
    }

    /// Uses `model` for the judge model `name` (tests, programs that build their own models).
    pub fn with_model(mut self, name: impl Into<String>, model: ChatModelRef) -> Self {
        self.models.insert(name.into(), model);
        self
    }
}

impl Evaluator {
    /// The evaluators of the spec's top-level `evals:` list, checked against the spec (agent and model
    /// names).
    ///
    /// # Errors
    /// Every problem, located in the spec file: an unknown kind or field, a missing or mistyped field, a bad
    /// regex or schema, an expression or template that does not compile or reads an unknown variable, an
    /// agent or judge model the spec does not define, a duplicate name.
    pub fn of_spec(spec: &Spec) -> Result<Vec<Evaluator>, SpecErrors> {
        read_entries(spec.evals(), spec.file(), spec)
    }

    /// The evaluators of an evaluators file (`--evals FILE.yaml`: a list, or a mapping with `evals:`),
    /// checked against `spec`.
    ///
    /// # Errors
    /// The file cannot be read or parsed, or every problem [`Evaluator::of_spec`] reports, located in it.
    pub fn from_file(path: &Path, spec: &Spec) -> Result<Vec<Evaluator>, SpecErrors> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SpecErrors {
            errors: vec![SpecError {
                file: file.clone(),
                line: 0,
                column: 0,
                agent: None,
                field: None,
                message: format!("cannot read the evaluators: {e}"),
                hint: None,
            }],
        })?;
        let entries = agentic_spec::read_evals(&text, &file)?;
        read_entries(&entries, &file, spec)
    }

    /// Applies the evaluator to what a case's run gave; `judges` holds the models of `judge` evaluators.
    pub async fn evaluate(&self, seen: &Observation, judges: &Judges) -> EvalResult {
        self.evaluate_with(&Variables::new(seen), judges).await
    }

    /// Applies each of `evaluators` to what a case's run gave, in order (the variables of their expressions and
    /// templates made once for all of them).
    pub async fn evaluate_all(evaluators: &[Evaluator], seen: &Observation, judges: &Judges) -> Vec<EvalResult> {
        let vars = Variables::new(seen);
        let mut results = Vec::with_capacity(evaluators.len());
        for evaluator in evaluators {
            results.push(evaluator.evaluate_with(&vars, judges).await);
        }
        results
    }

    async fn evaluate_with(&self, vars: &Variables<'_>, judges: &Judges) -> EvalResult {
        let seen = vars.seen;
        let (passed, score, reason) = match &self.check {
            Check::Equals { value } => equals(value.as_ref(), vars),
            Check::Contains { text, ignore_case } => contains(text.as_ref(), *ignore_case, vars),
            Check::Regex { pattern } => {
                let text = as_text(&seen.output);
                boolean(pattern.is_match(&text), || format!("output {} does not match /{pattern}/", shown_text(&text)))
            }
            Check::Schema { validator } => match validator.iter_errors(&seen.output).next() {
                None => boolean(true, String::new),
                Some(e) => {
                    let at = e.instance_path().to_string();
                    let at = if at.is_empty() { String::new() } else { format!(" at {at}") };
                    boolean(false, || format!("output does not match the schema{at}: {}", cut(&e.to_string())))
                }
            },
            Check::Expression { check, threshold } => expression(check, *threshold, vars),
            Check::Trajectory { must_run, must_not_run, order, max_steps } => {
                trajectory(must_run, must_not_run, order, *max_steps, &seen.trajectory)
            }
            Check::Judge { model, rubric, threshold } => judge(model, rubric, *threshold, vars, judges).await,
            Check::Cost { max_tokens, max_model_calls, max_cost_usd } => {
                cost(*max_tokens, *max_model_calls, *max_cost_usd, &seen.usage)
            }
        };
        EvalResult { evaluator: self.name.clone(), kind: self.check.kind().to_string(), passed, score, reason }
    }
}

/// An observation's variables ([`VARIABLES`]), made on first use and shared by the evaluators of a case.
struct Variables<'a> {
    seen: &'a Observation,
    made: std::sync::OnceLock<Vec<(&'static str, Value)>>,
}

impl<'a> Variables<'a> {
    fn new(seen: &'a Observation) -> Self {
        Variables { seen, made: std::sync::OnceLock::new() }
    }

    fn get(&self) -> &[(&'static str, Value)] {
        self.made.get_or_init(|| self.seen.variables())
    }
}

/// A boolean evaluator's outcome: score 1 and no reason when it holds, else score 0 and `reason()`.
fn boolean(ok: bool, reason: impl FnOnce() -> String) -> (bool, f64, Option<String>) {
    if ok { (true, 1.0, None) } else { (false, 0.0, Some(reason())) }
}

fn equals(value: Option<&Expression>, vars: &Variables<'_>) -> (bool, f64, Option<String>) {
    let seen = vars.seen;
    let Some(expected) = &seen.expected else {
        return boolean(false, || "the case has no `expected` to compare with".to_string());
    };
    let (label, actual) = match value {
        None => ("output".to_string(), seen.output.clone()),
        Some(e) => match e.eval(&ScopeView::default(), vars.get()) {
            Ok(v) => (format!("`{}`", e.source()), v),
            Err(why) => return boolean(false, || format!("`{}` cannot be evaluated: {why}", e.source())),
        },
    };
    boolean(same(&actual, expected), || format!("{label} {} != expected {}", shown(&actual), shown(expected)))
}

/// JSON equality, numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn contains(text: Option<&Template>, ignore_case: bool, vars: &Variables<'_>) -> (bool, f64, Option<String>) {
    let seen = vars.seen;
    let needle = match text {
        Some(t) => match t.render(&ScopeView::default(), vars.get()) {
            Ok(s) => s,
            Err(why) => return boolean(false, || format!("`text` cannot be rendered: {why}")),
        },
        None => match &seen.expected {
            Some(expected) => as_text(expected),
            None => return boolean(false, || "the case has no `expected` to look for (or give `text`)".to_string()),
        },
    };
    let haystack = as_text(&seen.output);
    let found =
        if ignore_case { haystack.to_lowercase().contains(&needle.to_lowercase()) } else { haystack.contains(&needle) };
    boolean(found, || format!("output {} does not contain {}", shown_text(&haystack), shown_text(&needle)))
}

fn expression(check: &Expression, threshold: f64, vars: &Variables<'_>) -> (bool, f64, Option<String>) {
    let value = match check.eval(&ScopeView::default(), vars.get()) {
        Ok(v) => v,
        Err(why) => return boolean(false, || format!("`{}` cannot be evaluated: {why}", check.source())),
    };
    match &value {
        Value::Bool(b) => boolean(*b, || format!("`{}` is false", check.source())),
        Value::Number(n) if n.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x)) => {
            let score = n.as_f64().unwrap_or_default();
            if score >= threshold {
                (true, score, None)
            } else {
                let reason = format!("`{}` scored {score}, below the threshold {threshold}", check.source());
                (false, score, Some(reason))
            }
        }
        other => boolean(truthy(other), || format!("`{}` is not true: it gave {}", check.source(), shown(other))),
    }
}

/// The truth of a JSON value as minijinja tests it: `null`, `false`, `0`, `""`, `[]` and `{}` are false.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn trajectory(
    must_run: &[String],
    must_not_run: &[String],
    order: &[String],
    max_steps: Option<u64>,
    ran: &[String],
) -> (bool, f64, Option<String>) {
    let mut why = Vec::new();
    for name in must_run.iter().filter(|n| !ran.contains(n)) {
        why.push(format!("agent `{name}` did not run"));
    }
    for name in must_not_run.iter().filter(|n| ran.contains(n)) {
        why.push(format!("agent `{name}` ran"));
    }
    let mut next = 0;
    for name in ran {
        if order.get(next) == Some(name) {
            next += 1;
        }
    }
    if next < order.len() {
        why.push(format!("the agents did not run in the order {} (ran: {})", order.join(" → "), ran.join(", ")));
    }
    if let Some(max) = max_steps
        && ran.len() as u64 > max
    {
        why.push(format!("{} steps, more than max_steps {max}", ran.len()));
    }
    boolean(why.is_empty(), || why.join("; "))
}

fn cost(
    max_tokens: Option<u64>,
    max_model_calls: Option<u64>,
    max_cost_usd: Option<f64>,
    usage: &RunUsage,
) -> (bool, f64, Option<String>) {
    let mut why = Vec::new();
    let tokens = usage.input_tokens + usage.output_tokens;
    if let Some(max) = max_tokens
        && tokens > max
    {
        why.push(format!("{tokens} tokens, more than max_tokens {max}"));
    }
    if let Some(max) = max_model_calls
        && usage.model_calls > max
    {
        why.push(format!("{} model calls, more than max_model_calls {max}", usage.model_calls));
    }
    if let Some(max) = max_cost_usd {
        match usage.cost_usd {
            Some(c) if c > max => why.push(format!("cost ${c}, more than max_cost_usd {max}")),
            None if usage.model_calls > 0 => {
                why.push("the cost is not known: the models called have no `prices`".to_string());
            }
            _ => {}
        }
    }
    boolean(why.is_empty(), || why.join("; "))
}

/// What the judge is told besides the rubric.
const JUDGE_SYSTEM: &str = "You evaluate the answer of an AI system against a rubric. Score how well it meets the \
    rubric, from 0 (not at all) to 1 (fully), and say why in one sentence. Answer with JSON only: \
    {\"score\": <number from 0 to 1>, \"reason\": \"<why>\"}.";

async fn judge(
    model: &str,
    rubric: &Template,
    threshold: f64,
    vars: &Variables<'_>,
    judges: &Judges,
) -> (bool, f64, Option<String>) {
    let Some(chat) = judges.models.get(model) else {
        return (false, 0.0, Some(format!("the judge model `{model}` is not built")));
    };
    let prompt = match rubric.render(&ScopeView::default(), vars.get()) {
        Ok(p) => p,
        Err(why) => return (false, 0.0, Some(format!("the rubric cannot be rendered: {why}"))),
    };
    let mut request = ChatRequest::new(vec![ChatMessage::system(JUDGE_SYSTEM), ChatMessage::user(prompt)]);
    if chat.info().json_schema {
        let schema = json!({
            "type": "object",
            "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
            "required": ["score", "reason"],
            "additionalProperties": false,
        });
        request =
            request.response_format(ResponseFormat::JsonSchema { name: "judgement".to_string(), schema, strict: true });
    }
    let answer = match chat.chat(request).await {
        Ok(answer) => answer.text().to_string(),
        Err(e) => return (false, 0.0, Some(format!("the judge model `{model}` failed: {e}"))),
    };
    match judgement(&answer) {
        Ok((score, reason)) if score >= threshold => (true, score, Some(reason)),
        Ok((score, reason)) => {
            (false, score, Some(format!("score {score} is below the threshold {threshold}: {reason}")))
        }
        Err(why) => (false, 0.0, Some(format!("the judge model `{model}` answered {}: {why}", shown_text(&answer)))),
    }
}

/// The score and reason of a judge's answer: a JSON object `{"score": 0–1, "reason": ".."}`, alone or
/// within text (a model that wraps it in prose or a code fence).
fn judgement(answer: &str) -> Result<(f64, String), String> {
    let start = answer.find('{').ok_or("no JSON object {\"score\", \"reason\"}")?;
    let end = answer.rfind('}').ok_or("no JSON object {\"score\", \"reason\"}")?;
    let value: Value = serde_json::from_str(answer.get(start..=end).unwrap_or_default())
        .map_err(|e| format!("not a JSON object {{\"score\", \"reason\"}} ({e})"))?;
    let score = value.get("score").and_then(Value::as_f64).ok_or("no number `score`")?;
    if !(0.0..=1.0).contains(&score) {
        return Err(format!("the score {score} is not between 0 and 1"));
    }
    let reason = value.get("reason").and_then(Value::as_str).unwrap_or_default().to_string();
    Ok((score, reason))
}

/// A value as text: a string as it is, anything else as JSON.
pub(crate) fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as a reason quotes it: JSON, cut at [`SHOWN_CHARS`].
pub(crate) fn shown(v: &Value) -> String {
    cut(&v.to_string())
}

/// A text as a reason quotes it: a JSON string, cut.
fn shown_text(s: &str) -> String {
    shown(&Value::String(s.to_string()))
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Reading the entries

/// The fields each kind takes besides `kind` and `name`.
fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "equals" => &["value"],
        "contains" => &["text", "ignore_case"],
        "regex" => &["pattern"],
        "schema" => &["schema"],
        "expression" => &["check", "threshold"],
        "trajectory" => &["must_run", "must_not_run", "order", "max_steps"],
        "judge" => &["model", "rubric", "threshold"],
        "cost" => &["max_tokens", "max_model_calls", "max_cost_usd"],
        _ => &[],
    }
}

/// Reads `entries` (from `file`) into evaluators checked against `spec`.
fn read_entries(entries: &[EvalEntry], file: &str, spec: &Spec) -> Result<Vec<Evaluator>, SpecErrors> {
    let mut errors = Vec::new();
    let mut out: Vec<Evaluator> = Vec::new();
    let mut of_kind: HashMap<&'static str, usize> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let mut r = Reader { entry, index, file, spec, errors: &mut errors };
        let Some(mut evaluator) = r.evaluator() else { continue };
        let kind = evaluator.check.kind();
        let n = of_kind.entry(kind).or_default();
        *n += 1;
        if evaluator.name.is_empty() {
            evaluator.name = if *n == 1 { kind.to_string() } else { format!("{kind}#{n}") };
        }
        if let Some(first) = out.iter().find(|e| e.name == evaluator.name) {
            let pos = entry.get("name").map_or(entry.pos, |f| f.value_pos);
            let message = format!(
                "duplicate evaluator name `{}` (first at line {}, column {}); give each a `name`",
                evaluator.name, first.pos.line, first.pos.column
            );
            r.err(pos, Some("name"), message);
            continue;
        }
        out.push(evaluator);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        errors.sort_by_key(|e| (e.line, e.column));
        Err(SpecErrors { errors })
    }
}

/// Reads one entry, recording its problems.
struct Reader<'a> {
    entry: &'a EvalEntry,
    index: usize,
    file: &'a str,
    spec: &'a Spec,
    errors: &'a mut Vec<SpecError>,
}

impl Reader<'_> {
    fn err(&mut self, pos: Pos, key: Option<&str>, message: impl Into<String>) {
        let field = match key {
            Some(key) => format!("evals[{}].{key}", self.index),
            None => format!("evals[{}]", self.index),
        };
        self.errors.push(SpecError {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
            agent: None,
            field: Some(field),
            message: message.into(),
            hint: None,
        });
    }

    fn field(&self, key: &str) -> Option<&EvalField> {
        self.entry.get(key)
    }

    fn evaluator(&mut self) -> Option<Evaluator> {
        let entry = self.entry;
        let kind = match entry.get("kind") {
            None => {
                self.err(entry.pos, None, format!("missing field `kind` (one of {})", listed(&KINDS)));
                return None;
            }
            Some(EvalField { value: Value::String(kind), value_pos, .. }) => {
                if !KINDS.contains(&kind.as_str()) {
                    let hint = suggest(kind, &KINDS).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
                    let message = format!("unknown evaluator kind `{kind}`{hint}, expected one of {}", listed(&KINDS));
                    self.err(*value_pos, Some("kind"), message);
                    return None;
                }
                kind.clone()
            }
            Some(f) => {
                let message = format!(
                    "expected a kind ({}), found {}",
                    listed(&KINDS),
                    agentic_engine::json_type_phrase(&f.value)
                );
                self.err(f.value_pos, Some("kind"), message);
                return None;
            }
        };
        let own = fields_of(&kind);
        let before = self.errors.len();
        for f in &entry.fields {
            if f.key == "kind" || f.key == "name" || own.contains(&f.key.as_str()) {
                continue;
            }
            let hint = suggest(&f.key, own).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
            let all: Vec<&str> = own.iter().copied().chain(["name"]).collect();
            let message =
                format!("unknown field `{}` of a `{kind}` evaluator{hint}, expected one of {}", f.key, listed(&all));
            self.err(f.key_pos, None, message);
        }
        let name = self.string("name");
        let check = self.check(&kind);
        if self.errors.len() > before {
            return None;
        }
        let name = name.unwrap_or_default();
        Some(Evaluator { name, check: check?, pos: entry.pos })
    }

    fn check(&mut self, kind: &str) -> Option<Check> {
        Some(match kind {
            "equals" => Check::Equals { value: self.expression("value", false) },
            "contains" => {
                Check::Contains { text: self.template("text", false), ignore_case: self.boolean("ignore_case") }
            }
            "regex" => {
                let (pattern, pos) = self.required_string("pattern")?;
                match regex::Regex::new(&pattern) {
                    Ok(pattern) => Check::Regex { pattern },
                    Err(e) => {
                        self.err(
                            pos,
                            Some("pattern"),
                            format!("invalid regular expression: {}", one_line(&e.to_string())),
                        );
                        return None;
                    }
                }
            }
            "schema" => {
                let Some(f) = self.field("schema") else {
                    self.err(self.entry.pos, None, "missing field `schema` (a JSON schema the output must match)");
                    return None;
                };
                let (schema, pos) = (f.value.clone(), f.value_pos);
                match jsonschema::validator_for(&schema) {
                    Ok(validator) => Check::Schema { validator: Box::new(validator) },
                    Err(e) => {
                        self.err(pos, Some("schema"), format!("invalid JSON schema: {e}"));
                        return None;
                    }
                }
            }
            "expression" => Check::Expression { check: self.expression("check", true)?, threshold: self.threshold()? },
            "trajectory" => {
                let must_run = self.names("must_run");
                let must_not_run = self.names("must_not_run");
                let order = self.names("order");
                let max_steps = self.count("max_steps");
                let given = ["must_run", "must_not_run", "order", "max_steps"].iter().any(|k| self.field(k).is_some());
                if !given {
                    self.err(
                        self.entry.pos,
                        None,
                        "a `trajectory` evaluator needs `must_run`, `must_not_run`, `order` or `max_steps`",
                    );
                    return None;
                }
                Check::Trajectory { must_run, must_not_run, order, max_steps }
            }
            "judge" => {
                let (model, pos) = self.required_string("model")?;
                if !self.spec.models().iter().any(|m| m.name == model) {
                    let names: Vec<&str> = self.spec.models().iter().map(|m| m.name.as_str()).collect();
                    let known = if names.is_empty() {
                        "the spec has none".to_string()
                    } else {
                        format!("the spec's models: {}", listed(&names))
                    };
                    self.err(pos, Some("model"), format!("model `{model}` is not in `models` ({known})"));
                    return None;
                }
                let rubric = self.template("rubric", true)?;
                Check::Judge { model, rubric, threshold: self.threshold()? }
            }
            "cost" => {
                let max_tokens = self.count("max_tokens");
                let max_model_calls = self.count("max_model_calls");
                let max_cost_usd = self.number("max_cost_usd");
                if ["max_tokens", "max_model_calls", "max_cost_usd"].iter().all(|k| self.field(k).is_none()) {
                    self.err(
                        self.entry.pos,
                        None,
                        "a `cost` evaluator needs `max_tokens`, `max_model_calls` or `max_cost_usd`",
                    );
                    return None;
                }
                Check::Cost { max_tokens, max_model_calls, max_cost_usd }
            }
            _ => return None,
        })
    }

    /// An optional string field.
    fn string(&mut self, key: &str) -> Option<String> {
        let f = self.field(key)?;
        match &f.value {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::String(_) => {
                let pos = f.value_pos;
                self.err(pos, Some(key), "must not be empty");
                None
            }
            other => {
                let (pos, found) = (f.value_pos, agentic_engine::json_type_phrase(other));
                self.err(pos, Some(key), format!("expected a string, found {found}"));
                None
            }
        }
    }

    fn required_string(&mut self, key: &str) -> Option<(String, Pos)> {
        match self.field(key) {
            None => {
                self.err(self.entry.pos, None, format!("missing field `{key}`"));
                None
            }
            Some(f) => {
                let pos = f.value_pos;
                self.string(key).map(|s| (s, pos))
            }
        }
    }

    fn boolean(&mut self, key: &str) -> bool {
        let Some(f) = self.field(key) else { return false };
        match f.value {
            Value::Bool(b) => b,
            ref other => {
                let (pos, found) = (f.value_pos, agentic_engine::json_type_phrase(other));
                self.err(pos, Some(key), format!("expected true or false, found {found}"));
                false
            }
        }
    }

    /// An optional number ≥ 0.
    fn number(&mut self, key: &str) -> Option<f64> {
        let f = self.field(key)?;
        let pos = f.value_pos;
        match f.value.as_f64() {
            Some(x) if x >= 0.0 => Some(x),
            _ => {
                let found = f.value.to_string();
                self.err(pos, Some(key), format!("expected a number of at least 0, found {found}"));
                None
            }
        }
    }

    /// An optional integer ≥ 0.
    fn count(&mut self, key: &str) -> Option<u64> {
        let f = self.field(key)?;
        let pos = f.value_pos;
        match f.value.as_u64() {
            Some(n) => Some(n),
            None => {
                let found = f.value.to_string();
                self.err(pos, Some(key), format!("expected an integer of at least 0, found {found}"));
                None
            }
        }
    }

    /// `threshold`: a number in 0–1, default [`DEFAULT_THRESHOLD`]; `None` after an error.
    fn threshold(&mut self) -> Option<f64> {
        let Some(f) = self.field("threshold") else { return Some(DEFAULT_THRESHOLD) };
        let pos = f.value_pos;
        match f.value.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => Some(x),
            _ => {
                let found = f.value.to_string();
                self.err(pos, Some("threshold"), format!("expected a number between 0 and 1, found {found}"));
                None
            }
        }
    }

    /// A list of agent names of the spec.
    fn names(&mut self, key: &str) -> Vec<String> {
        let Some(f) = self.field(key) else { return Vec::new() };
        let pos = f.value_pos;
        let Value::Array(items) = &f.value else {
            let found = agentic_engine::json_type_phrase(&f.value);
            self.err(pos, Some(key), format!("expected a list of agent names, found {found}"));
            return Vec::new();
        };
        let items = items.clone();
        let agents: Vec<&str> = self.spec.agents().iter().map(|a| a.name.as_str()).collect();
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            match item.as_str() {
                Some(name) if agents.contains(&name) => out.push(name.to_string()),
                Some(name) => {
                    let hint = suggest(name, &agents).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
                    self.err(pos, Some(key), format!("no agent `{name}` in the spec{hint}"));
                }
                None => {
                    let found = agentic_engine::json_type_phrase(item);
                    self.err(pos, Some(key), format!("expected an agent name, found {found}"));
                }
            }
        }
        out
    }

    /// An expression field (required or not), compiled, reading only [`VARIABLES`].
    fn expression(&mut self, key: &str, required: bool) -> Option<Expression> {
        let (source, pos) = self.source(key, required)?;
        match Expression::compile(&source) {
            Ok(e) => self.known_variables(key, pos, &e.variables()).then_some(e),
            Err(e) => {
                self.err(pos, Some(key), format!("invalid expression: {}", one_line(&e.to_string())));
                None
            }
        }
    }

    /// A template field (required or not), compiled, reading only [`VARIABLES`].
    fn template(&mut self, key: &str, required: bool) -> Option<Template> {
        let (source, pos) = self.source(key, required)?;
        match Template::compile(&source) {
            Ok(t) => self.known_variables(key, pos, &t.variables()).then_some(t),
            Err(e) => {
                self.err(pos, Some(key), format!("invalid template: {}", one_line(&e.to_string())));
                None
            }
        }
    }

    fn source(&mut self, key: &str, required: bool) -> Option<(String, Pos)> {
        if required {
            self.required_string(key)
        } else {
            let pos = self.field(key)?.value_pos;
            self.string(key).map(|s| (s, pos))
        }
    }

    /// Whether every variable is one of [`VARIABLES`] (else the first unknown one is reported).
    fn known_variables(&mut self, key: &str, pos: Pos, used: &[String]) -> bool {
        match used.iter().find(|v| !VARIABLES.contains(&v.as_str())) {
            None => true,
            Some(v) => {
                let hint = suggest(v, &VARIABLES).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
                self.err(
                    pos,
                    Some(key),
                    format!("unknown variable `{v}`{hint}; the variables are {}", listed(&VARIABLES)),
                );
                false
            }
        }
    }
}

/// `a`, `b`, `c` as `` `a`, `b`, `c` ``.
fn listed(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// A message on one line (minijinja's and regex's span several).
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The candidate closest to `word` when it is close enough to be a misspelling.
fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let best = candidates.iter().map(|c| (distance(word, c), *c)).min_by_key(|(d, _)| *d)?;
    (best.0 <= 2.max(word.chars().count() / 3)).then_some(best.1)
}

/// The Levenshtein distance between `a` and `b`.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (row[j + 1] + 1).min(row[j] + 1).min(prev + usize::from(ca != *cb));
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_agents::model::ScriptedModel;

    const SPEC: &str = "version: 1\nroot: main\nmodels:\n  grader: { provider: scripted, replies: [] }\nagents:\n  main: { kind: sequence, agents: [classify, reply] }\n  classify: { kind: compute, value: \"'refund'\", output_key: category }\n  reply: { kind: compute, template: \"ok\", output_key: answer }\n";

    /// The evaluators of `evals` (YAML, the list's items) under [`SPEC`], or the errors as text.
    fn read(evals: &str) -> Result<Vec<Evaluator>, Vec<String>> {
        let spec = Spec::parse(&format!("{SPEC}evals:\n{evals}"), "spec.yaml").map_err(|e| vec![e.to_string()])?;
        Evaluator::of_spec(&spec).map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    fn one(evals: &str) -> Evaluator {
        read(evals).unwrap_or_else(|e| panic!("{e:?}")).remove(0)
    }

    fn seen(output: Value, expected: Option<Value>) -> Observation {
        Observation {
            output,
            expected,
            inputs: json!({"ticket": "my money back"}).as_object().cloned().unwrap_or_default(),
            state: json!({"category": "refund"}).as_object().cloned().unwrap_or_default(),
            trajectory: vec!["main".to_string(), "classify".to_string(), "reply".to_string()],
            usage: RunUsage { input_tokens: 200, output_tokens: 100, model_calls: 2, cost_usd: Some(0.0015) },
            latency_ms: 40,
        }
    }

    async fn outcome(e: &Evaluator, seen: &Observation) -> (bool, f64, Option<String>) {
        let r = e.evaluate(seen, &Judges::default()).await;
        (r.passed, r.score, r.reason)
    }

    #[tokio::test]
    async fn equals_compares_the_output_or_a_value_with_expected() {
        let e = one("  - { kind: equals, name: category }\n");
        assert_eq!(e.name, "category");
        assert_eq!(outcome(&e, &seen(json!("refund"), Some(json!("refund")))).await, (true, 1.0, None));
        assert_eq!(
            outcome(&e, &seen(json!("billing"), Some(json!("refund")))).await,
            (false, 0.0, Some(r#"output "billing" != expected "refund""#.to_string()))
        );
        assert!(outcome(&e, &seen(json!({"n": 1}), Some(json!({"n": 1.0})))).await.0, "numbers by value");
        assert_eq!(
            outcome(&e, &seen(json!("x"), None)).await,
            (false, 0.0, Some("the case has no `expected` to compare with".to_string()))
        );
        let v = one("  - { kind: equals, value: \"state.category | upper\" }\n");
        assert_eq!(
            outcome(&v, &seen(json!("x"), Some(json!("refund")))).await,
            (false, 0.0, Some(r#"`state.category | upper` "REFUND" != expected "refund""#.to_string()))
        );
    }

    #[tokio::test]
    async fn contains_looks_for_the_expected_text_or_its_own() {
        let e = one("  - { kind: contains }\n");
        assert_eq!(outcome(&e, &seen(json!("We will refund you."), Some(json!("refund")))).await, (true, 1.0, None));
        assert_eq!(
            outcome(&e, &seen(json!("We will Refund you."), Some(json!("refund")))).await,
            (false, 0.0, Some(r#"output "We will Refund you." does not contain "refund""#.to_string()))
        );
        let i = one("  - { kind: contains, text: \"{{ inputs.ticket | upper }}\", ignore_case: true }\n");
        assert_eq!(outcome(&i, &seen(json!("about MY money back"), None)).await, (true, 1.0, None));
        let j = one("  - { kind: contains, text: '\"a\":1' }\n");
        assert!(outcome(&j, &seen(json!({"a": 1}), None)).await.0, "a JSON output as its text");
    }

    #[tokio::test]
    async fn regex_matches_the_output_as_text() {
        let e = one("  - { kind: regex, pattern: '^(refund|billing)$' }\n");
        assert_eq!(outcome(&e, &seen(json!("refund"), None)).await, (true, 1.0, None));
        assert_eq!(
            outcome(&e, &seen(json!("other"), None)).await,
            (false, 0.0, Some(r#"output "other" does not match /^(refund|billing)$/"#.to_string()))
        );
    }

    #[tokio::test]
    async fn schema_validates_the_output() {
        let e = one(
            "  - kind: schema\n    schema: { type: object, required: [category], properties: { category: { enum: [refund, billing] } } }\n",
        );
        assert_eq!(outcome(&e, &seen(json!({"category": "refund"}), None)).await, (true, 1.0, None));
        assert_eq!(
            outcome(&e, &seen(json!({"category": "other"}), None)).await,
            (
                false,
                0.0,
                Some(
                    r#"output does not match the schema at /category: "other" is not one of "refund" or "billing""#
                        .to_string()
                )
            )
        );
        let (passed, _, reason) = outcome(&e, &seen(json!("text"), None)).await;
        assert_eq!(
            (passed, reason.as_deref()),
            (false, Some(r#"output does not match the schema: "text" is not of type "object""#))
        );
    }

    #[tokio::test]
    async fn expression_is_a_truth_or_a_score() {
        let e = one(
            "  - { kind: expression, check: \"output == expected and latency_ms < 1000 and usage.model_calls == 2\" }\n",
        );
        assert_eq!(outcome(&e, &seen(json!("a"), Some(json!("a")))).await, (true, 1.0, None));
        assert_eq!(
            outcome(&e, &seen(json!("a"), Some(json!("b")))).await,
            (
                false,
                0.0,
                Some("`output == expected and latency_ms < 1000 and usage.model_calls == 2` is false".to_string())
            )
        );
        let s = one("  - { kind: expression, check: \"(output | length) / 10\", threshold: 0.3 }\n");
        assert_eq!(outcome(&s, &seen(json!("abcd"), None)).await, (true, 0.4, None));
        assert_eq!(
            outcome(&s, &seen(json!("ab"), None)).await,
            (false, 0.2, Some("`(output | length) / 10` scored 0.2, below the threshold 0.3".to_string()))
        );
        let t = one("  - { kind: expression, check: \"trajectory | select('equalto', 'reply') | list\" }\n");
        assert_eq!(outcome(&t, &seen(json!(null), None)).await, (true, 1.0, None));
        let u = one("  - { kind: expression, check: \"output.missing.deeper\" }\n");
        let (passed, score, reason) = outcome(&u, &seen(json!("x"), None)).await;
        assert_eq!((passed, score), (false, 0.0));
        assert!(reason.unwrap_or_default().starts_with("`output.missing.deeper` cannot be evaluated: "));
    }

    #[tokio::test]
    async fn trajectory_checks_the_agents_that_ran() {
        let e = one(
            "  - { kind: trajectory, must_run: [classify], must_not_run: [reply], order: [reply, classify], max_steps: 2 }\n",
        );
        let (passed, score, reason) = outcome(&e, &seen(json!(null), None)).await;
        assert_eq!((passed, score), (false, 0.0));
        assert_eq!(
            reason.as_deref(),
            Some(
                "agent `reply` ran; the agents did not run in the order reply → classify (ran: main, classify, reply); \
                 3 steps, more than max_steps 2"
            )
        );
        let ok = one("  - { kind: trajectory, must_run: [classify, reply], order: [classify, reply], max_steps: 3 }\n");
        assert_eq!(outcome(&ok, &seen(json!(null), None)).await, (true, 1.0, None));
    }

    #[tokio::test]
    async fn cost_holds_every_limit() {
        let e = one("  - { kind: cost, max_tokens: 250, max_model_calls: 1, max_cost_usd: 0.001 }\n");
        assert_eq!(
            outcome(&e, &seen(json!(null), None)).await.2.as_deref(),
            Some(
                "300 tokens, more than max_tokens 250; 2 model calls, more than max_model_calls 1; cost $0.0015, more than max_cost_usd 0.001"
            )
        );
        let ok = one("  - { kind: cost, max_tokens: 300, max_cost_usd: 0.01 }\n");
        assert_eq!(outcome(&ok, &seen(json!(null), None)).await, (true, 1.0, None));
        let mut unpriced = seen(json!(null), None);
        unpriced.usage.cost_usd = None;
        assert_eq!(
            outcome(&ok, &unpriced).await.2.as_deref(),
            Some("the cost is not known: the models called have no `prices`")
        );
    }

    #[tokio::test]
    async fn judge_asks_the_model_for_a_score() {
        let e = one("  - { kind: judge, model: grader, rubric: \"Is {{ output }} polite?\", threshold: 0.7 }\n");
        let model = ScriptedModel::new([
            r#"{"score": 0.8, "reason": "polite"}"#,
            "Here: {\"score\": 0.5, \"reason\": \"curt\"}",
            "I like it",
            r#"{"score": 3, "reason": "x"}"#,
        ]);
        let judges = Judges::default().with_model("grader", ChatModelRef::new(model.clone()));
        let s = seen(json!("Thank you!"), None);
        let r = e.evaluate(&s, &judges).await;
        assert_eq!((r.passed, r.score, r.reason.as_deref()), (true, 0.8, Some("polite")));
        let asked = model.requests();
        assert_eq!(asked[0].messages.last().map(ChatMessage::text), Some("Is Thank you! polite?"));
        let r = e.evaluate(&s, &judges).await;
        assert_eq!(
            (r.passed, r.score, r.reason.as_deref()),
            (false, 0.5, Some("score 0.5 is below the threshold 0.7: curt"))
        );
        let r = e.evaluate(&s, &judges).await;
        assert_eq!(
            (r.passed, r.reason.as_deref()),
            (false, Some(r#"the judge model `grader` answered "I like it": no JSON object {"score", "reason"}"#))
        );
        let r = e.evaluate(&s, &judges).await;
        assert_eq!(
            (r.passed, r.reason.as_deref()),
            (
                false,
                Some(
                    r#"the judge model `grader` answered "{\"score\": 3, \"reason\": \"x\"}": the score 3 is not between 0 and 1"#
                )
            )
        );
    }

    #[test]
    fn names_default_to_the_kind_then_numbered() {
        let names: Vec<String> = read("  - { kind: equals }\n  - { kind: regex, pattern: x }\n  - { kind: equals, value: output }\n  - { kind: equals, name: third }\n")
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["equals", "regex", "equals#2", "third"]);
        assert_eq!(
            read("  - { kind: equals }\n  - { kind: regex, pattern: x, name: equals }\n").unwrap_err(),
            [
                "spec.yaml:11:38: field `evals[1].name`: duplicate evaluator name `equals` (first at line 10, column 5); give each a `name`"
            ]
        );
    }

    #[test]
    fn bad_entries_are_located() {
        let errors = read(concat!(
            "  - { kind: equal }\n",
            "  - { kind: regex, pattern: '(' }\n",
            "  - { kind: expression, check: 'output ==' }\n",
            "  - { kind: judge, model: nobody, rubric: x }\n",
            "  - { kind: contains, txt: x }\n",
            "  - { kind: expression, check: ouput }\n",
            "  - { kind: trajectory, must_run: [clasify] }\n",
            "  - { kind: cost }\n",
            "  - { name: x }\n",
            "  - { kind: judge, model: grader, rubric: x, threshold: 2 }\n",
            "  - { kind: schema, schema: { type: 12 } }\n",
        ))
        .unwrap_err();
        assert_eq!(errors.len(), 11, "{errors:#?}");
        let expected = [
            "spec.yaml:10:13: field `evals[0].kind`: unknown evaluator kind `equal` (did you mean `equals`?), expected one of `equals`, `contains`, `regex`, `schema`, `expression`, `trajectory`, `judge`, `cost`",
            "spec.yaml:11:29: field `evals[1].pattern`: invalid regular expression: regex parse error: ( ^ error: unclosed group",
            "spec.yaml:12:32: field `evals[2].check`: invalid expression: ",
            "spec.yaml:13:27: field `evals[3].model`: model `nobody` is not in `models` (the spec's models: `grader`)",
            "spec.yaml:14:23: field `evals[4]`: unknown field `txt` of a `contains` evaluator (did you mean `text`?), expected one of `text`, `ignore_case`, `name`",
            "spec.yaml:15:32: field `evals[5].check`: unknown variable `ouput` (did you mean `output`?); the variables are `output`, `expected`, `inputs`, `state`, `trajectory`, `usage`, `latency_ms`",
            "spec.yaml:16:35: field `evals[6].must_run`: no agent `clasify` in the spec (did you mean `classify`?)",
            "spec.yaml:17:5: field `evals[7]`: a `cost` evaluator needs `max_tokens`, `max_model_calls` or `max_cost_usd`",
            "spec.yaml:18:5: field `evals[8]`: missing field `kind` (one of `equals`, `contains`, `regex`, `schema`, `expression`, `trajectory`, `judge`, `cost`)",
            "spec.yaml:19:57: field `evals[9].threshold`: expected a number between 0 and 1, found 2",
            "spec.yaml:20:29: field `evals[10].schema`: invalid JSON schema: 12 is not valid under any of the schemas listed in the 'anyOf' keyword",
        ];
        for (got, want) in errors.iter().zip(expected) {
            assert!(got.starts_with(want), "\n got: {got}\nwant: {want}…");
        }
    }

    #[test]
    fn an_evaluators_file_is_a_list_or_a_mapping() {
        let spec = Spec::parse(SPEC, "spec.yaml").unwrap_or_else(|e| panic!("{e}"));
        let dir = std::env::temp_dir().join(format!("agentic-eval-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let file = dir.join("evals.yaml");
        std::fs::write(&file, "evals:\n  - { kind: regex, pattern: '[' }\n").unwrap_or_default();
        let errors = Evaluator::from_file(&file, &spec).unwrap_err();
        assert!(
            errors
                .to_string()
                .starts_with(&format!("{}:2:29: field `evals[0].pattern`: invalid regular expression", file.display())),
            "{errors}"
        );
        std::fs::write(&file, "- { kind: equals }\n").unwrap_or_default();
        assert_eq!(Evaluator::from_file(&file, &spec).map(|e| e.len()).unwrap_or_default(), 1);
        let missing = Evaluator::from_file(&dir.join("none.yaml"), &spec).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with(&format!("{}: cannot read the evaluators: ", dir.join("none.yaml").display())),
            "{missing}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
