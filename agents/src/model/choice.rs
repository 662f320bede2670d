//! A model chosen per invocation (SPEC.md §7): [`ModelChoice`] names its models and a default, and a
//! function of the state gives the name to use — a cheap model for short requests, a strong one for hard ones,
//! a cheaper one once the run has spent enough. Agents hold it as one model ([`super::ChatModelRef::choosing`],
//! [`crate::decision::DecisionModelRef::choosing`]) and resolve it when invoked ([`ModelChoice::pick`]).

use std::sync::Arc;

use agentic_engine::{InvocationContext, ScopeView, Stop};
use serde_json::{Map, Value, json};

/// What a [`ModelChoice`] asks of the state: `(view, inputs, usage)` → the name of the model to use, `None` for
/// the default, or why no name can be given. `inputs` are the invocation's resolved inputs (a mapper's item
/// among them), which take precedence over the state; `usage` is the run's usage so far ([`usage_value`]) when
/// the choice reads it ([`ModelChoice::reads_usage`]), else `null`.
pub type ChooseFn =
    Arc<dyn Fn(&ScopeView, &Map<String, Value>, &Value) -> Result<Option<String>, String> + Send + Sync>;

/// Models by name, a default among them, and the function that picks one per invocation.
///
/// ```
/// use agentic_agents::model::{ChatModelRef, ModelChoice, ScriptedModel};
/// let choice = ModelChoice::new("small", |view| {
///     let long = view.get("request").and_then(|v| v.as_str()).is_some_and(|r| r.len() > 200);
///     long.then(|| "strong".to_string())
/// })
/// .model("small", ChatModelRef::new(ScriptedModel::new(["short answer"]).named("small")))
/// .model("strong", ChatModelRef::new(ScriptedModel::new(["long answer"]).named("strong")));
/// let model = ChatModelRef::choosing(choice);
/// assert_eq!(model.choice().map(|c| c.names()), Some(vec!["small", "strong"]));
/// ```
pub struct ModelChoice<M> {
    choose: ChooseFn,
    reads_usage: bool,
    models: Vec<(String, M)>,
    default: String,
}

impl<M> std::fmt::Debug for ModelChoice<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelChoice")
            .field("models", &self.names())
            .field("default", &self.default)
            .field("reads_usage", &self.reads_usage)
            .finish_non_exhaustive()
    }
}

impl<M> Clone for ModelChoice<M>
where
    M: Clone,
{
    fn clone(&self) -> Self {
        ModelChoice {
            choose: self.choose.clone(),
            reads_usage: self.reads_usage,
            models: self.models.clone(),
            default: self.default.clone(),
        }
    }
}

impl<M: Clone> ModelChoice<M> {
    /// A choice whose `choose` gives a model's name from the state (`None`: `default`). Add the models with
    /// [`ModelChoice::model`]; `default` must be one of them.
    pub fn new(
        default: impl Into<String>,
        choose: impl Fn(&ScopeView) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        ModelChoice {
            choose: Arc::new(move |view, _, _| Ok(choose(view))),
            reads_usage: false,
            models: Vec::new(),
            default: default.into(),
        }
    }

    /// A choice whose `choose` may fail (an expression that cannot be evaluated) and, with `reads_usage`, is
    /// given the run's usage so far ([`usage_value`]; one question to the run's scope per invocation).
    pub fn with(default: impl Into<String>, reads_usage: bool, choose: ChooseFn) -> Self {
        ModelChoice { choose, reads_usage, models: Vec::new(), default: default.into() }
    }
}

impl<M> ModelChoice<M> {
    /// Adds `model` under `name` (a later model of the same name replaces it).
    pub fn model(mut self, name: impl Into<String>, model: impl Into<M>) -> Self {
        let name = name.into();
        let model = model.into();
        match self.models.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = model,
            None => self.models.push((name, model)),
        }
        self
    }

    /// The models' names, in the order they were added.
    pub fn names(&self) -> Vec<&str> {
        self.models.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The models with their names, in the order they were added.
    pub fn models(&self) -> impl Iterator<Item = (&str, &M)> {
        self.models.iter().map(|(n, m)| (n.as_str(), m))
    }

    /// The default model's name.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// The default model, when it is among the models.
    pub fn default_model(&self) -> Option<&M> {
        self.get(&self.default)
    }

    /// The model named `name`.
    pub fn get(&self, name: &str) -> Option<&M> {
        self.models.iter().find(|(n, _)| n == name).map(|(_, m)| m)
    }

    /// Whether the choice reads the run's usage (the `usage` variable of a spec's `choose`).
    pub fn reads_usage(&self) -> bool {
        self.reads_usage
    }

    /// The name the choice gives over `view`, the invocation's `inputs` and `usage` (`null` when it does not
    /// read it), the default when it gives none.
    ///
    /// # Errors
    /// The choice's own error, or a name that is not among the models — both as text naming the value and the
    /// models there are.
    pub fn name_for(&self, view: &ScopeView, inputs: &Map<String, Value>, usage: &Value) -> Result<String, String> {
        let name = (self.choose)(view, inputs, usage).map_err(|e| format!("the model choice failed: {e}"))?;
        let name = name.unwrap_or_else(|| self.default.clone());
        if self.get(&name).is_none() {
            return Err(format!(
                "the model choice gave `{name}`, which is not one of the models it chooses from ({})",
                self.names().join(", ")
            ));
        }
        Ok(name)
    }
}

impl<M: Clone> ModelChoice<M> {
    /// The model to use in `ctx`'s invocation, with its name: the choice over the invocation's inputs and the
    /// state (and the run's usage when it reads it).
    ///
    /// # Errors
    /// [`Stop::Failed`] naming the value and the models ([`ModelChoice::name_for`]), or the run's scope
    /// failing to answer for the usage.
    pub async fn pick(&self, ctx: &InvocationContext) -> Result<(String, M), Stop> {
        let usage = if self.reads_usage {
            let usage = ctx.run().scope().usage(&[]).await?;
            usage_value(&usage)
        } else {
            Value::Null
        };
        let name = self.name_for(&ctx.view(), ctx.inputs(), &usage).map_err(|e| ctx.fail(e))?;
        match self.get(&name) {
            Some(model) => Ok((name, model.clone())),
            // `name_for` gave a name among the models.
            None => Err(ctx.fail(format!("the model choice gave `{name}`, which it does not hold")).into()),
        }
    }
}

/// The run's usage as a choice reads it: `{"input_tokens", "output_tokens", "tokens", "model_calls",
/// "cost_usd" (USD, `null` when no call was priced), "models": [names], "by_model": {name: {"input_tokens",
/// "output_tokens", "tokens", "model_calls", "cost_usd"}}}`.
pub fn usage_value(usage: &agentic_engine::budget::Usage) -> Value {
    let mut by_model = serde_json::Map::new();
    for m in usage.per_model() {
        by_model.insert(
            m.model.clone(),
            json!({
                "input_tokens": m.input_tokens,
                "output_tokens": m.output_tokens,
                "tokens": m.input_tokens + m.output_tokens,
                "model_calls": m.model_calls,
                "cost_usd": m.cost_usd,
            }),
        );
    }
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tokens": usage.tokens(),
        "model_calls": usage.model_calls,
        "cost_usd": usage.cost_usd,
        "models": usage.models,
        "by_model": by_model,
    })
}
