//! The `compute` agent: a minijinja expression (JSON result) or template (string result) over the state.
//! Its inputs are inferred from the variables it uses unless set explicitly.

use std::sync::Arc;

use agentic_engine::{Agent, AgentError, AgentRef, AgentSpec, InputSpec, InvocationContext, SpecBuilder, Stop};
use serde_json::Value;

use crate::error::ExprError;
use crate::expr::{Expression, Template};

#[derive(Debug)]
enum Body {
    Expression(Expression),
    Template(Template),
}

/// A non-AI agent computing its result from the state with an expression or a template.
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// let total = Compute::expression("total", "threadA + threadB").unwrap().output_key("result").build();
/// assert_eq!(total.spec().inputs.len(), 2);
/// ```
#[derive(Debug)]
pub struct Compute {
    spec: AgentSpec,
    body: Arc<Body>,
}

/// Builder of a [`Compute`] agent. Defaults: inputs = the variables used, no output key, not optional.
#[derive(Debug)]
pub struct ComputeBuilder {
    spec: AgentSpec,
    body: Body,
}

impl SpecBuilder for ComputeBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl Compute {
    /// An agent named `name` whose result is the JSON value of the expression `source`.
    ///
    /// # Errors
    /// [`ExprError::Syntax`] when `source` does not compile.
    pub fn expression(name: impl Into<String>, source: &str) -> Result<ComputeBuilder, ExprError> {
        let e = Expression::compile(source)?;
        let optional = e.optional_variables().to_vec();
        Ok(ComputeBuilder::new(name.into(), e.variables(), &optional, Body::Expression(e)))
    }

    /// An agent named `name` whose result is the string rendered from the template `source`.
    ///
    /// # Errors
    /// [`ExprError::Syntax`] when `source` does not compile.
    pub fn template(name: impl Into<String>, source: &str) -> Result<ComputeBuilder, ExprError> {
        let t = Template::compile(source)?;
        let optional = t.optional_variables().to_vec();
        Ok(ComputeBuilder::new(name.into(), t.variables(), &optional, Body::Template(t)))
    }
}

impl ComputeBuilder {
    /// Its inputs are `variables`; those in `optional` (read only through `default(..)` or under `is
    /// defined`) are optional inputs.
    fn new(name: String, variables: Vec<String>, optional: &[String], body: Body) -> Self {
        let mut spec = AgentSpec::new(name, "compute");
        spec.inputs = variables
            .into_iter()
            .map(|v| {
                let is_optional = optional.contains(&v);
                InputSpec::new(v).optional(is_optional)
            })
            .collect();
        ComputeBuilder { spec, body }
    }

    /// Builds the agent.
    pub fn build(self) -> AgentRef {
        AgentRef::new(Compute { spec: self.spec, body: Arc::new(self.body) })
    }
}

/// Evaluates the body; coerced inputs and call bindings (a mapper's item) take precedence over raw state.
fn evaluate(
    body: &Body,
    view: &agentic_engine::ScopeView,
    inputs: &serde_json::Map<String, Value>,
) -> Result<Value, (String, String)> {
    match body {
        Body::Expression(e) => e.eval_inputs(view, inputs).map_err(|m| (m, e.source().to_string())),
        Body::Template(t) => t.render_inputs(view, inputs).map(Value::String).map_err(|m| (m, t.source().to_string())),
    }
}

impl Body {
    /// The state keys the body reads (its variables).
    fn reads(&self) -> Vec<String> {
        match self {
            Body::Expression(e) => e.variables(),
            Body::Template(t) => t.variables(),
        }
    }
}

impl Agent for Compute {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        // A key the body reads beyond its declared inputs (`inputs:` narrowed in a spec) may be still in the
        // making by an async agent: its readers wait for it as for an input.
        ctx.wait_for_keys(&self.body.reads()).await?;
        let view = ctx.view();
        let inputs = ctx.inputs().clone();
        let result = if self.spec.timeout.is_some() {
            // Evaluation is synchronous: with a timeout, run it off the async workers so the timeout can fire.
            let body = self.body.clone();
            tokio::task::spawn_blocking(move || evaluate(&body, &view, &inputs))
                .await
                .map_err(|e| ctx.fail(format!("evaluation task: {e}")))?
        } else {
            evaluate(&self.body, &view, &inputs)
        };
        result.map_err(|(message, source)| {
            Stop::Failed(AgentError::Expression {
                agent: ctx.agent_name().to_string(),
                path: ctx.path().to_string(),
                what: format!("`{source}`"),
                message,
            })
        })
    }
}
