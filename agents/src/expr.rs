//! [`Expression`] and [`Template`]: minijinja over a [`ScopeView`], documented on [`Expression`].

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use agentic_engine::ScopeView;
use minijinja::value::{Enumerator, Object, Serde};
use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};

use crate::error::ExprError;

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        crate::text_filters::register(&mut env);
        env
    })
}

/// Prints lists and maps as JSON (`{"ok": true}`) instead of minijinja's Python-like form; everything else
/// as minijinja does.
fn json_formatter(
    out: &mut minijinja::Output<'_>,
    state: &mut minijinja::State<'_, '_>,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    use minijinja::value::ValueKind;
    if matches!(value.kind(), ValueKind::Map | ValueKind::Seq) {
        let text = serde_json::to_string(value)
            .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::BadSerialization, e.to_string()))?;
        out.write_str(&text).map_err(|e| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string()))
    } else {
        minijinja::escape_formatter(out, state, value)
    }
}

/// The variables that are state keys: everything undeclared except the environment's globals (`range`,
/// `dict`, `namespace`, ...), sorted.
fn state_variables(env: &Environment<'_>, used: std::collections::HashSet<String>) -> Vec<String> {
    let globals: BTreeSet<&str> = env.globals().map(|(name, _)| name).collect();
    let vars: BTreeSet<String> = used.into_iter().filter(|v| !globals.contains(v.as_str())).collect();
    vars.into_iter().collect()
}

/// Those of `variables` (sorted) that `optional` holds, in order.
fn optional_of(variables: &[String], optional: std::collections::HashSet<String>) -> Vec<String> {
    variables.iter().filter(|v| optional.contains(*v)).cloned().collect()
}

/// The evaluation context: the state snapshot plus extra variables, converted lazily key by key.
#[derive(Debug)]
struct ScopeObject {
    view: ScopeView,
    extra: Vec<(String, Value)>,
}

impl Object for ScopeObject {
    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let key = key.as_str()?;
        if let Some((_, v)) = self.extra.iter().find(|(k, _)| k == key) {
            return Some(minijinja::Value::from(Serde(v)));
        }
        self.view.get(key).map(|v| minijinja::Value::from(Serde(v)))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<minijinja::Value> = self.view.iter().map(|(k, _)| minijinja::Value::from(k)).collect();
        keys.extend(self.extra.iter().map(|(k, _)| minijinja::Value::from(k.as_str())));
        Enumerator::Values(keys)
    }
}

fn context(view: &ScopeView, extra: &[(&str, Value)]) -> minijinja::Value {
    owned_context(view, extra.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

/// The context of an agent's resolved `inputs` over `view`. An input among `optional` the run lacks (resolved
/// to `null`; the state holds no `null`) stays undefined, so `default(..)` and `is defined` see it missing.
fn inputs_context(
    view: &ScopeView,
    inputs: &Map<String, Value>,
    optional: &[String],
    extra: Vec<(String, Value)>,
) -> minijinja::Value {
    let lacking = |k: &String, v: &Value| v.is_null() && optional.contains(k);
    let mut vars: Vec<(String, Value)> =
        inputs.iter().filter(|(k, v)| !lacking(k, v)).map(|(k, v)| (k.clone(), v.clone())).collect();
    // Looked up first to last: the extra variables come first.
    vars.splice(0..0, extra);
    owned_context(view, vars)
}

fn owned_context(view: &ScopeView, extra: Vec<(String, Value)>) -> minijinja::Value {
    minijinja::Value::from_object(ScopeObject { view: view.clone(), extra })
}

fn to_json(value: &minijinja::Value) -> Result<Value, String> {
    if value.is_undefined() {
        return Ok(Value::Null);
    }
    serde_json::to_value(value).map_err(|e| e.to_string())
}

fn describe(e: &minijinja::Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// A compiled minijinja expression that evaluates to a JSON value.
///
/// minijinja expressions and templates over a [`ScopeView`]: the language of the spec's `value`, `when`,
/// `exit_when`, `output` (expressions) and `template`, `system`, `user`, `prompt` (templates).
///
/// State keys are variables; extra variables (`iteration` inside loops) are passed per evaluation. Only the
/// keys an expression touches are converted, so evaluation cost does not grow with the state's size.
/// Undefined variables follow minijinja's semi-strict mode: `x is defined` and `if x` work, printing or
/// computing with a missing key is an error naming it.
pub struct Expression {
    source: String,
    compiled: minijinja::Expression<'static, 'static>,
    variables: Vec<String>,
    optional: Vec<String>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Expression").field(&self.source).finish()
    }
}

impl Expression {
    /// Compiles `source` (e.g. `score >= threshold`, `threadA + threadB`, `items | length`).
    ///
    /// # Errors
    /// [`ExprError::Syntax`] with minijinja's message (which includes the position).
    pub fn compile(source: &str) -> Result<Self, ExprError> {
        let compiled = environment()
            .compile_expression_owned(source.to_string())
            .map_err(|e| ExprError::Syntax { source_text: source.to_string(), message: describe(&e) })?;
        let variables = state_variables(environment(), compiled.undeclared_variables(false));
        let optional = optional_of(&variables, crate::guarded::expression_optional(source));
        Ok(Expression { source: source.to_string(), compiled, variables, optional })
    }

    /// The source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Top-level variables it reads, sorted (state keys plus any extra variables such as `iteration`).
    pub fn variables(&self) -> Vec<String> {
        self.variables.clone()
    }

    /// The [`Expression::variables`] it reads only through `default(..)` or under `is defined`, sorted: a run
    /// may lack them.
    pub fn optional_variables(&self) -> &[String] {
        &self.optional
    }

    /// The constants it can evaluate to (`none` left out), as JSON, in order of appearance: itself when it is
    /// one, those of the branches of `a if c else b`, of `and` / `or` operands and of `default(..)` (a model
    /// choice's names, checked by `validate`). A value computed any other way is not known.
    pub fn result_constants(&self) -> Vec<Value> {
        crate::guarded::expression_results(&self.source)
    }

    /// Evaluates over `view` plus `extra` variables.
    ///
    /// # Errors
    /// The evaluation error (undefined value, type error), as text.
    pub fn eval(&self, view: &ScopeView, extra: &[(&str, Value)]) -> Result<Value, String> {
        let v = self.compiled.eval(context(view, extra)).map_err(|e| describe(&e))?;
        to_json(&v)
    }

    /// Evaluates and tests for truth (minijinja truthiness: empty, zero, false, none are false).
    ///
    /// # Errors
    /// As [`Expression::eval`].
    pub fn eval_bool(&self, view: &ScopeView, extra: &[(&str, Value)]) -> Result<bool, String> {
        let v = self.compiled.eval(context(view, extra)).map_err(|e| describe(&e))?;
        Ok(v.is_true())
    }

    /// Evaluates and tests for truth as [`Expression::eval_bool`], but `None` when the value is undefined (a
    /// bare name that is neither a variable nor a state key, `args.missing`): for rules that must not read
    /// a missing name as false.
    ///
    /// # Errors
    /// As [`Expression::eval`].
    pub fn eval_bool_defined(&self, view: &ScopeView, extra: &[(&str, Value)]) -> Result<Option<bool>, String> {
        let v = self.compiled.eval(context(view, extra)).map_err(|e| describe(&e))?;
        Ok(if v.is_undefined() { None } else { Some(v.is_true()) })
    }

    /// Evaluates over `view` plus an agent's resolved `inputs` (which take precedence over the state), copying
    /// each input once.
    ///
    /// # Errors
    /// As [`Expression::eval`].
    pub fn eval_inputs(&self, view: &ScopeView, inputs: &Map<String, Value>) -> Result<Value, String> {
        self.eval_inputs_with(view, inputs, Vec::new())
    }

    /// As [`Expression::eval_inputs`], with `extra` variables besides (which take precedence over both).
    ///
    /// # Errors
    /// As [`Expression::eval`].
    pub fn eval_inputs_with(
        &self,
        view: &ScopeView,
        inputs: &Map<String, Value>,
        extra: Vec<(String, Value)>,
    ) -> Result<Value, String> {
        let v = self.compiled.eval(inputs_context(view, inputs, &self.optional, extra)).map_err(|e| describe(&e))?;
        to_json(&v)
    }
}

/// A compiled minijinja template that renders to a string.
pub struct Template {
    source: String,
    env: Environment<'static>,
    variables: Vec<String>,
    optional: Vec<String>,
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Template").field(&self.source()).finish()
    }
}

const NAME: &str = "t";

impl Template {
    /// Compiles `source` (e.g. `Hello {{ name }}!`).
    ///
    /// # Errors
    /// [`ExprError::Syntax`] with minijinja's message (which includes the line).
    pub fn compile(source: &str) -> Result<Self, ExprError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        env.set_formatter(json_formatter);
        crate::text_filters::register(&mut env);
        let syntax = |e: minijinja::Error| ExprError::Syntax { source_text: source.to_string(), message: describe(&e) };
        env.add_template_owned(NAME, source.to_string()).map_err(syntax)?;
        let used = env.get_template(NAME).map_err(syntax)?.undeclared_variables(false);
        let variables = state_variables(&env, used);
        let optional = optional_of(&variables, crate::guarded::template_optional(source));
        Ok(Template { source: source.to_string(), env, variables, optional })
    }

    /// The source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Top-level variables it reads, sorted.
    pub fn variables(&self) -> Vec<String> {
        self.variables.clone()
    }

    /// The [`Template::variables`] it reads only through `default(..)` or under `is defined`, sorted: a run
    /// may lack them.
    pub fn optional_variables(&self) -> &[String] {
        &self.optional
    }

    /// Renders over `view` plus `extra` variables.
    ///
    /// # Errors
    /// The render error (undefined value, type error), as text.
    pub fn render(&self, view: &ScopeView, extra: &[(&str, Value)]) -> Result<String, String> {
        let t = self.env.get_template(NAME).map_err(|e| describe(&e))?;
        t.render(context(view, extra)).map_err(|e| describe(&e))
    }

    /// Renders over `view` plus an agent's resolved `inputs` (which take precedence over the state), copying
    /// each input once.
    ///
    /// # Errors
    /// As [`Template::render`].
    pub fn render_inputs(&self, view: &ScopeView, inputs: &Map<String, Value>) -> Result<String, String> {
        let t = self.env.get_template(NAME).map_err(|e| describe(&e))?;
        t.render(inputs_context(view, inputs, &self.optional, Vec::new())).map_err(|e| describe(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(v: Value) -> ScopeView {
        match v {
            Value::Object(m) => ScopeView::from_map(m),
            _ => ScopeView::default(),
        }
    }

    #[test]
    fn evaluates_over_state_and_extra() {
        let e = Expression::compile("threadA + threadB").expect("compile");
        assert_eq!(e.variables(), vec!["threadA".to_string(), "threadB".to_string()]);
        assert_eq!(e.eval(&view(json!({"threadA": 10, "threadB": 20})), &[]), Ok(json!(30)));
        let c = Expression::compile("score >= 0.8 or iteration >= 3").expect("compile");
        assert_eq!(c.eval_bool(&view(json!({"score": 0.5})), &[("iteration", json!(3))]), Ok(true));
        assert_eq!(c.eval_bool(&view(json!({"score": 0.5})), &[("iteration", json!(1))]), Ok(false));
        let u = Expression::compile("x").expect("compile");
        assert_eq!(u.eval_bool_defined(&view(json!({})), &[]), Ok(None), "an undefined name");
        assert_eq!(u.eval_bool_defined(&view(json!({"x": 0})), &[]), Ok(Some(false)));
        assert_eq!(u.eval_bool_defined(&view(json!({})), &[("x", json!("yes"))]), Ok(Some(true)));
        let a = Expression::compile("args.flag").expect("compile");
        assert_eq!(a.eval_bool_defined(&view(json!({})), &[("args", json!({}))]), Ok(None), "a missing attribute");
        let d = Expression::compile("x is defined").expect("compile");
        assert_eq!(d.eval_bool(&view(json!({})), &[]), Ok(false));
        let l = Expression::compile("[a, b * 2, {'k': c}]").expect("compile");
        assert_eq!(l.eval(&view(json!({"a": "s", "b": 1.5, "c": [1]})), &[]), Ok(json!(["s", 3.0, {"k": [1]}])));
    }

    #[test]
    fn templates_render_and_report_syntax_errors() {
        let loop_t = Template::compile("{% for i in range(n) %}{{ i }}{% endfor %}").expect("compile");
        assert_eq!(loop_t.variables(), vec!["n".to_string()], "globals such as range are not state keys");
        let t = Template::compile("Hello {{ name }}!").expect("compile");
        assert_eq!(t.variables(), vec!["name".to_string()]);
        assert_eq!(t.render(&view(json!({"name": "Ada"})), &[]), Ok("Hello Ada!".to_string()));
        assert!(t.render(&view(json!({})), &[]).is_err(), "printing a missing key is an error");
        let inputs: Map<String, Value> = [("name".to_string(), json!("Grace"))].into_iter().collect();
        assert_eq!(t.render_inputs(&view(json!({"name": "Ada"})), &inputs), Ok("Hello Grace!".to_string()));
        let e = Expression::compile("n * 2").expect("compile");
        let n: Map<String, Value> = [("n".to_string(), json!(21))].into_iter().collect();
        assert_eq!(e.eval_inputs(&view(json!({"n": 1})), &n), Ok(json!(42)));
        let j = Template::compile("{{ v }}").expect("compile");
        assert_eq!(
            j.render(&view(json!({"v": {"ok": true, "n": [1, 2]}})), &[]),
            Ok(r#"{"ok":true,"n":[1,2]}"#.to_string())
        );
        assert!(matches!(Template::compile("{{ oops"), Err(ExprError::Syntax { .. })));
        // A variable read only through `default(..)`: optional, and a lacking input (resolved to null) stays
        // undefined for the default.
        let d = Template::compile("{{ n | default(0) }}/{{ m }}").expect("compile");
        assert_eq!(d.variables(), ["m", "n"]);
        assert_eq!(d.optional_variables(), ["n"]);
        let lacking: Map<String, Value> =
            [("n".to_string(), Value::Null), ("m".to_string(), json!(1))].into_iter().collect();
        assert_eq!(d.render_inputs(&view(json!({})), &lacking), Ok("0/1".to_string()));
        let given: Map<String, Value> =
            [("n".to_string(), json!(5)), ("m".to_string(), json!(1))].into_iter().collect();
        assert_eq!(d.render_inputs(&view(json!({})), &given), Ok("5/1".to_string()));
        let e = Expression::compile("place | default('agentic')").expect("compile");
        assert_eq!(e.optional_variables(), ["place"]);
        let place: Map<String, Value> = [("place".to_string(), Value::Null)].into_iter().collect();
        assert_eq!(e.eval_inputs(&view(json!({})), &place), Ok(json!("agentic")));
        assert!(matches!(Expression::compile("a +"), Err(ExprError::Syntax { .. })));
    }
}
