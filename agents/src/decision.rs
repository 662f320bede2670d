//! Decision models: typed questions about an input, answered with probabilities instead of free text.
//!
//! A [`DecisionRequest`] holds an input (any JSON value: a text, or named values) and named [`Question`]s:
//! a **choice** (exactly one of N named options), a **yes/no** question, or a **scale** (an ordered list of
//! levels; the answer is a number in `0..=levels-1`, the probability-weighted mean level index). A
//! [`DecisionModel`] answers every question of one request in one call, with an [`Answer`] per question name
//! carrying probabilities: per option for a choice (empty when the model does not report them), the
//! probability of "yes", per level for a scale.
//!
//! Implementations:
//! - [`ChatDecisionModel`] over any chat model ([`ChatModelRef`]): one chat call asking for a JSON object with
//!   one answer per question, constrained by a JSON-schema response format (each answer an `enum` of its
//!   allowed values) where the provider honours it, and with token log-probabilities when the provider
//!   reports them — the probability of each allowed answer is read from the alternatives of the token where
//!   the answer starts. Without log-probabilities the chosen answer gets probability 1 (a yes/no question
//!   may also be answered with a confidence between 0 and 1). An unreadable answer is fed back to the model a
//!   bounded number of times.
//! - [`ScriptedDecisionModel`]: canned decisions in order, for tests and demos (the spec's
//!   `provider: scripted` with `decisions: [..]`).
//!
//! Answers are checked against the request whatever the implementation ([`DecisionModelRef::decide`]): a
//! missing answer, an answer of the wrong kind, an option that was not offered or a level out of range is a
//! [`DecisionError::InvalidAnswer`].
//!
//! Follows LangChain4j's `DecisionModel` API (`DecisionRequest`, `ChoiceQuestion`, `YesNoQuestion`,
//! `ScaleQuestion`, answers with probabilities); the chat-model implementation with constrained JSON and
//! log-probabilities, and the scripted model, are ours.
//!
//! ```
//! use agentic_agents::decision::{DecisionModelRef, DecisionRequest, Question, ScriptedDecisionModel};
//! use serde_json::json;
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = DecisionModelRef::new(ScriptedDecisionModel::new([json!({"team": "billing", "urgent": 0.9})]));
//! let request = DecisionRequest::new("My payouts have been failing for 3 days")
//!     .question("team", Question::choice("Which team?", [("billing", "Payments"), ("sales", "Pricing")]))
//!     .question("urgent", Question::yes_no("Does this need attention today?"));
//! let response = model.decide(request).await?;
//! assert_eq!(response.choice("team")?, "billing");
//! assert_eq!(response.yes_no("urgent")?, 0.9);
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use agentic_engine::{AgentError, InvocationContext, Stop, TokenUsage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::llm::extract_json;
use crate::model::{ChatMessage, ChatModelRef, ChatRequest, ModelError, ResponseFormat, TokenLogprob};

/// One option of a choice question, or one level of a scale: a name and what it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionOption {
    /// The name (what the model answers).
    pub name: String,
    /// What the option covers (may be empty: the name says it all).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A typed question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Question {
    /// Exactly one of the options (at least one; names unique).
    Choice {
        /// The question.
        text: String,
        /// The options, in order.
        options: Vec<DecisionOption>,
    },
    /// Yes or no; the answer is the probability of "yes".
    YesNo {
        /// The question.
        text: String,
        /// When the answer should be yes (optional).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        yes_when: Option<String>,
        /// When the answer should be no (optional).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        no_when: Option<String>,
    },
    /// A place on an ordered scale (at least two levels, lowest first; names unique); the answer is a number
    /// in `0..=levels-1`.
    Scale {
        /// The question.
        text: String,
        /// The levels, lowest first.
        levels: Vec<DecisionOption>,
    },
}

fn options<N: Into<String>, D: Into<String>>(items: impl IntoIterator<Item = (N, D)>) -> Vec<DecisionOption> {
    items.into_iter().map(|(n, d)| DecisionOption { name: n.into(), description: d.into() }).collect()
}

impl Question {
    /// A choice among `options` given as `(name, description)` pairs.
    pub fn choice<N: Into<String>, D: Into<String>>(
        text: impl Into<String>,
        options: impl IntoIterator<Item = (N, D)>,
    ) -> Self {
        Question::Choice { text: text.into(), options: self::options(options) }
    }

    /// A yes/no question.
    pub fn yes_no(text: impl Into<String>) -> Self {
        Question::YesNo { text: text.into(), yes_when: None, no_when: None }
    }

    /// A yes/no question with the criteria for yes and for no.
    pub fn yes_no_when(text: impl Into<String>, yes_when: impl Into<String>, no_when: impl Into<String>) -> Self {
        Question::YesNo { text: text.into(), yes_when: Some(yes_when.into()), no_when: Some(no_when.into()) }
    }

    /// A scale with `levels` given as `(name, description)` pairs, lowest first.
    pub fn scale<N: Into<String>, D: Into<String>>(
        text: impl Into<String>,
        levels: impl IntoIterator<Item = (N, D)>,
    ) -> Self {
        Question::Scale { text: text.into(), levels: self::options(levels) }
    }

    /// The question's text.
    pub fn text(&self) -> &str {
        match self {
            Question::Choice { text, .. } | Question::YesNo { text, .. } | Question::Scale { text, .. } => text,
        }
    }

    /// `choice`, `yes/no` or `scale`.
    pub fn kind(&self) -> &'static str {
        match self {
            Question::Choice { .. } => "choice",
            Question::YesNo { .. } => "yes/no",
            Question::Scale { .. } => "scale",
        }
    }

    /// The answers a model may give, in order: option names, `yes`/`no`, or level names.
    pub fn allowed(&self) -> Vec<String> {
        match self {
            Question::Choice { options, .. } => options.iter().map(|o| o.name.clone()).collect(),
            Question::YesNo { .. } => vec!["yes".to_string(), "no".to_string()],
            Question::Scale { levels, .. } => levels.iter().map(|o| o.name.clone()).collect(),
        }
    }

    fn validate(&self, name: &str) -> Result<(), String> {
        if self.text().trim().is_empty() {
            return Err(format!("question `{name}` has no text"));
        }
        let (list, min, what) = match self {
            Question::Choice { options, .. } => (options, 1, "option"),
            Question::Scale { levels, .. } => (levels, 2, "level"),
            Question::YesNo { .. } => return Ok(()),
        };
        if list.len() < min {
            return Err(format!(
                "{} question `{name}` needs at least {min} {what}(s), found {}",
                self.kind(),
                list.len()
            ));
        }
        for (i, o) in list.iter().enumerate() {
            if o.name.trim().is_empty() {
                return Err(format!("question `{name}`: {what} {} has an empty name", i + 1));
            }
            if list[..i].iter().any(|p| p.name == o.name) {
                return Err(format!("question `{name}`: two {what}s are named `{}`", o.name));
            }
        }
        Ok(())
    }
}

/// Questions about one input, answered in one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRequest {
    /// The input the questions are about: a text, or named values (a JSON object).
    pub input: Value,
    /// The questions by name, in order (names unique).
    pub questions: Vec<(String, Question)>,
}

impl DecisionRequest {
    /// A request about `input` without questions yet.
    pub fn new(input: impl Into<Value>) -> Self {
        DecisionRequest { input: input.into(), questions: Vec::new() }
    }

    /// Adds question `name`.
    pub fn question(mut self, name: impl Into<String>, question: Question) -> Self {
        self.questions.push((name.into(), question));
        self
    }

    /// The question named `name`.
    pub fn get(&self, name: &str) -> Option<&Question> {
        self.questions.iter().find(|(n, _)| n == name).map(|(_, q)| q)
    }

    /// Checks the request: at least one question, names non-empty and unique, every question well formed.
    ///
    /// # Errors
    /// [`DecisionError::InvalidRequest`] saying what is wrong.
    pub fn validate(&self) -> Result<(), DecisionError> {
        if self.questions.is_empty() {
            return Err(DecisionError::InvalidRequest("a decision request needs at least one question".into()));
        }
        for (i, (name, q)) in self.questions.iter().enumerate() {
            if name.trim().is_empty() {
                return Err(DecisionError::InvalidRequest(format!("question {} has an empty name", i + 1)));
            }
            if self.questions[..i].iter().any(|(n, _)| n == name) {
                return Err(DecisionError::InvalidRequest(format!("two questions are named `{name}`")));
            }
            q.validate(name).map_err(DecisionError::InvalidRequest)?;
        }
        Ok(())
    }
}

/// The answer to one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Answer {
    /// The chosen option, with the probability of each option when the model reported them (else empty).
    Choice {
        /// The chosen option's name.
        value: String,
        /// Probability per option name (empty when not reported).
        probabilities: BTreeMap<String, f64>,
    },
    /// The probability of "yes" (0 to 1).
    YesNo {
        /// The probability of "yes".
        probability: f64,
    },
    /// A place on the scale: the probability-weighted mean level index, and the probability of each level in
    /// level order (empty when not reported).
    Scale {
        /// Mean level index, in `0..=levels-1`.
        mean: f64,
        /// Probability per level, lowest first (empty when not reported).
        probabilities: Vec<f64>,
    },
}

impl Answer {
    /// `choice`, `yes/no` or `scale`.
    pub fn kind(&self) -> &'static str {
        match self {
            Answer::Choice { .. } => "choice",
            Answer::YesNo { .. } => "yes/no",
            Answer::Scale { .. } => "scale",
        }
    }

    /// Checks the answer against its question: same kind, an offered option, probabilities in 0..=1 for
    /// offered options, the mean within the scale.
    fn check(&self, question: &Question) -> Result<(), String> {
        let unit = |p: f64| (0.0..=1.0).contains(&p);
        match (self, question) {
            (Answer::Choice { value, probabilities }, Question::Choice { options, .. }) => {
                let offered = |n: &str| options.iter().any(|o| o.name == n);
                if !offered(value) {
                    return Err(format!("`{value}` is not one of the options ({})", names(options)));
                }
                for (k, p) in probabilities {
                    if !offered(k) {
                        return Err(format!("a probability for `{k}`, which is not one of the options"));
                    }
                    if !unit(*p) {
                        return Err(format!("the probability of `{k}` is {p}, not between 0 and 1"));
                    }
                }
                Ok(())
            }
            (Answer::YesNo { probability }, Question::YesNo { .. }) if unit(*probability) => Ok(()),
            (Answer::YesNo { probability }, Question::YesNo { .. }) => {
                Err(format!("the probability of yes is {probability}, not between 0 and 1"))
            }
            (Answer::Scale { mean, probabilities }, Question::Scale { levels, .. }) => {
                let top = (levels.len() - 1) as f64;
                if !(0.0..=top).contains(mean) {
                    return Err(format!("the mean level {mean} is outside 0..={top}"));
                }
                if !probabilities.is_empty() && probabilities.len() != levels.len() {
                    return Err(format!("{} level probabilities for {} levels", probabilities.len(), levels.len()));
                }
                match probabilities.iter().find(|p| !unit(**p)) {
                    Some(p) => Err(format!("a level probability is {p}, not between 0 and 1")),
                    None => Ok(()),
                }
            }
            (a, q) => Err(format!("a {} answer to a {} question", a.kind(), q.kind())),
        }
    }
}

fn names(options: &[DecisionOption]) -> String {
    options.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// The answers to a request, by question name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionResponse {
    /// One answer per question name.
    pub answers: BTreeMap<String, Answer>,
    /// Tokens used (zero when the model does not report them).
    #[serde(default)]
    pub usage: TokenUsage,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// What the answer cost in USD, when the model has prices (a chat model asked as a decision model:
    /// [`crate::model::ChatModelRef::with_prices`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl DecisionResponse {
    fn answer(&self, name: &str) -> Result<&Answer, DecisionError> {
        self.answers.get(name).ok_or_else(|| DecisionError::NoAnswer { question: name.to_string() })
    }

    fn wrong_kind(name: &str, want: &'static str, got: &Answer) -> DecisionError {
        DecisionError::WrongKind { question: name.to_string(), expected: want, found: got.kind() }
    }

    /// The chosen option of choice question `name`.
    ///
    /// # Errors
    /// [`DecisionError::NoAnswer`] when there is no answer by that name, [`DecisionError::WrongKind`] when it
    /// is not a choice answer.
    pub fn choice(&self, name: &str) -> Result<&str, DecisionError> {
        match self.answer(name)? {
            Answer::Choice { value, .. } => Ok(value),
            other => Err(Self::wrong_kind(name, "choice", other)),
        }
    }

    /// The probability per option of choice question `name` (empty when the model did not report them).
    ///
    /// # Errors
    /// As [`DecisionResponse::choice`].
    pub fn choice_probabilities(&self, name: &str) -> Result<&BTreeMap<String, f64>, DecisionError> {
        match self.answer(name)? {
            Answer::Choice { probabilities, .. } => Ok(probabilities),
            other => Err(Self::wrong_kind(name, "choice", other)),
        }
    }

    /// The probability of "yes" for yes/no question `name`.
    ///
    /// # Errors
    /// [`DecisionError::NoAnswer`] when there is no answer by that name, [`DecisionError::WrongKind`] when it
    /// is not a yes/no answer.
    pub fn yes_no(&self, name: &str) -> Result<f64, DecisionError> {
        match self.answer(name)? {
            Answer::YesNo { probability } => Ok(*probability),
            other => Err(Self::wrong_kind(name, "yes/no", other)),
        }
    }

    /// The mean level index of scale question `name`.
    ///
    /// # Errors
    /// [`DecisionError::NoAnswer`] when there is no answer by that name, [`DecisionError::WrongKind`] when it
    /// is not a scale answer.
    pub fn scale(&self, name: &str) -> Result<f64, DecisionError> {
        match self.answer(name)? {
            Answer::Scale { mean, .. } => Ok(*mean),
            other => Err(Self::wrong_kind(name, "scale", other)),
        }
    }

    /// Checks the answers against `request`: one answer per question, of the question's kind, within what the
    /// question offers.
    ///
    /// # Errors
    /// [`DecisionError::InvalidAnswer`] for the first answer that does not fit.
    pub fn check(&self, request: &DecisionRequest) -> Result<(), DecisionError> {
        let invalid = |question: &str, message: String| DecisionError::InvalidAnswer {
            model: self.model.clone(),
            question: question.to_string(),
            message,
            reply: serde_json::to_string(&self.answers).unwrap_or_default(),
            spent: Spent::default(),
        };
        for (name, q) in &request.questions {
            let Some(a) = self.answers.get(name) else { return Err(invalid(name, "no answer".to_string())) };
            a.check(q).map_err(|m| invalid(name, m))?;
        }
        if let Some(extra) = self.answers.keys().find(|k| request.get(k).is_none()) {
            return Err(invalid(extra, "an answer to a question that was not asked".to_string()));
        }
        Ok(())
    }
}

/// What a decision model's failed attempts used ([`DecisionError::InvalidAnswer`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// Tokens.
    pub usage: TokenUsage,
    /// Cost in USD, when the model has prices.
    pub cost_usd: Option<f64>,
}

/// Why a decision failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// The request is malformed (no questions, duplicate names, a choice without options, ...). The model was
    /// not called.
    #[error("invalid decision request: {0}")]
    InvalidRequest(String),
    /// The model's answer does not fit a question (after the feedback retries, for chat models).
    #[error("decision model `{model}`: invalid answer to `{question}`: {message}; the model replied: {reply}")]
    InvalidAnswer {
        /// The model's name.
        model: String,
        /// The question's name.
        question: String,
        /// What is wrong.
        message: String,
        /// The model's reply (or the scripted decision), as text.
        reply: String,
        /// What the model's attempts used (tokens, and cost when the model has prices): paid for, though no
        /// answer fits.
        spent: Spent,
    },
    /// A response has no answer under that name.
    #[error("no answer to `{question}`")]
    NoAnswer {
        /// The question's name.
        question: String,
    },
    /// A response's answer under that name is of another kind than the one read.
    #[error("the answer to `{question}` is a {found} answer, not a {expected} one")]
    WrongKind {
        /// The question's name.
        question: String,
        /// The kind read (`choice`, `yes/no`, `scale`).
        expected: &'static str,
        /// The answer's kind.
        found: &'static str,
    },
    /// The underlying chat model failed (or a scripted model ran out of decisions).
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// A decision model: answers every question of a request in one call (see the [module](self) docs).
///
/// Object safe; store models as [`DecisionModelRef`].
pub trait DecisionModel: Send + Sync + 'static {
    /// The model's name, for errors and records.
    fn name(&self) -> &str;

    /// Answers `request` (already validated by [`DecisionModelRef::decide`]).
    ///
    /// # Errors
    /// [`DecisionError`]: the model failed or its answer cannot be read.
    fn decide(&self, request: DecisionRequest) -> BoxFuture<'_, Result<DecisionResponse, DecisionError>>;

    /// The model that answers in `ctx`'s invocation when this one is chosen per invocation (SPEC.md §7;
    /// [`DecisionModelRef::choosing`], or a [`ChatDecisionModel`] over [`ChatModelRef::choosing`]): the
    /// choice's over the state. `None` — the default — for a model that answers itself.
    ///
    /// # Errors
    /// The choice's ([`crate::model::ModelChoice::pick`]).
    fn for_invocation<'a>(
        &'a self,
        ctx: &'a InvocationContext,
    ) -> BoxFuture<'a, Result<Option<DecisionModelRef>, Stop>> {
        let _ = ctx;
        Box::pin(async { Ok(None) })
    }
}

/// A shared decision model. Cloning is cheap. A chat model converts into one ([`ChatDecisionModel`] with
/// its defaults).
#[derive(Clone)]
pub struct DecisionModelRef(pub Arc<dyn DecisionModel>);

impl std::fmt::Debug for DecisionModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DecisionModelRef({})", self.name())
    }
}

impl DecisionModelRef {
    /// Wraps a model.
    pub fn new(model: impl DecisionModel) -> Self {
        DecisionModelRef(Arc::new(model))
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// A decision model chosen per invocation among `choice`'s models (SPEC.md §7): a router resolves it over
    /// the state when it decides ([`DecisionModelRef::decide_in`]). Its name is the default's; asked without
    /// being resolved ([`DecisionModelRef::decide`]) it fails with [`DecisionError::InvalidRequest`].
    pub fn choosing(choice: crate::model::ModelChoice<DecisionModelRef>) -> Self {
        DecisionModelRef::new(ChosenDecision { choice })
    }

    /// Validates `request`, asks the model and checks its answers against the request.
    ///
    /// # Errors
    /// [`DecisionError::InvalidRequest`] before any call; the model's errors; [`DecisionError::InvalidAnswer`]
    /// when an answer does not fit its question.
    pub async fn decide(&self, request: DecisionRequest) -> Result<DecisionResponse, DecisionError> {
        request.validate()?;
        let response = self.0.decide(request.clone()).await?;
        response.check(&request)?;
        Ok(response)
    }

    /// [`DecisionModelRef::decide`] as a model call of `ctx`'s invocation: numbered on the run's call tape
    /// (a replay answers it from the recording; its request is `{"model", "messages": [], "decision":
    /// <request>}`) and journaled with the invocation (purpose `decide`); a [`DecisionError`] becomes an
    /// [`AgentError`] through `failed`.
    ///
    /// # Errors
    /// The model's or the check's error through `failed`, a strict replay whose recording differs, or the
    /// journal write.
    pub async fn decide_in(
        &self,
        ctx: &InvocationContext,
        request: DecisionRequest,
        failed: impl FnOnce(DecisionError) -> AgentError,
    ) -> Result<DecisionResponse, Stop> {
        if let Some(chosen) = self.0.for_invocation(ctx).await? {
            // Boxed: the chosen model is never itself a choice, so this recursion is one level deep.
            return Box::pin(chosen.decide_in(ctx, request, failed)).await;
        }
        let mut options = serde_json::Map::new();
        options.insert("decision".to_string(), serde_json::to_value(&request).unwrap_or(Value::Null));
        let recorded = agentic_engine::model_request(self.name(), &[], &options);
        let taped = ctx.calls().taped(agentic_engine::CallKind::Model, recorded);
        let answer = match &taped {
            Some(call) => call.answer()?,
            None => None,
        };
        let response = match answer {
            Some(answer) => serde_json::from_value::<DecisionResponse>(answer).map_err(|e| {
                ctx.fail(format!("the recorded answer of decision model `{}` cannot be read: {e}", self.name()))
            })?,
            None => match self.decide(request).await {
                Ok(response) => response,
                Err(e) => {
                    // The failed attempts were paid for: their usage counts (SPEC.md §3).
                    if let DecisionError::InvalidAnswer { model, spent, .. } = &e
                        && (spent.usage.input > 0 || spent.usage.output > 0 || spent.cost_usd.is_some())
                    {
                        ctx.usage().add_model_call(model, spent.usage, spent.cost_usd);
                    }
                    return Err(failed(e).into());
                }
            },
        };
        let value = serde_json::to_value(&response).unwrap_or(Value::Null);
        if ctx.calls().journaled() {
            let t = response.usage;
            let (model, tokens) = (self.name(), (t.input, t.output));
            let entry = agentic_engine::ModelTurnEntry::call(
                "decide",
                model,
                Vec::new(),
                Some(options),
                value.clone(),
                tokens,
                None,
            )
            .labelled(&response.model);
            ctx.calls().record(vec![agentic_engine::CallEntry::Model(entry)], false).await?;
        }
        if let Some(call) = taped {
            call.record(value);
        }
        Ok(response)
    }
}

impl<M: DecisionModel> From<M> for DecisionModelRef {
    fn from(model: M) -> Self {
        DecisionModelRef::new(model)
    }
}

impl From<ChatModelRef> for DecisionModelRef {
    fn from(model: ChatModelRef) -> Self {
        DecisionModelRef::new(ChatDecisionModel::new(model))
    }
}

/// Strips quotes, backticks, whitespace and trailing periods from a free-text answer.
fn clean(text: &str) -> &str {
    text.trim().trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '.' || c.is_whitespace())
}

/// Reads one answer as written by a model or a script:
/// - choice: an option name (case-insensitive), or an object option → probability (the most likely wins;
///   ties: the first option);
/// - yes/no: `yes`/`no` (case-insensitive), `true`/`false`, or a probability of yes (a number, or a numeric
///   string, between 0 and 1);
/// - scale: a level name (case-insensitive), a mean level index (a number), or a list of level
///   probabilities.
fn read_answer(question: &Question, value: &Value) -> Result<Answer, String> {
    let unit = |p: f64| (0.0..=1.0).contains(&p);
    match question {
        Question::Choice { options, .. } => match value {
            Value::String(s) => {
                let s = clean(s);
                options
                    .iter()
                    .find(|o| o.name == s)
                    .or_else(|| options.iter().find(|o| o.name.eq_ignore_ascii_case(s)))
                    .map(|o| Answer::Choice { value: o.name.clone(), probabilities: BTreeMap::new() })
                    .ok_or_else(|| format!("`{s}` is not one of: {}", names(options)))
            }
            Value::Object(map) if !map.is_empty() => {
                let mut probabilities = BTreeMap::new();
                for (k, v) in map {
                    let Some(o) = options.iter().find(|o| o.name == *k) else {
                        return Err(format!("`{k}` is not one of: {}", names(options)));
                    };
                    match v.as_f64() {
                        Some(p) if unit(p) => probabilities.insert(o.name.clone(), p),
                        _ => return Err(format!("the probability of `{k}` must be a number between 0 and 1, got {v}")),
                    };
                }
                let mut best: Option<(&str, f64)> = None;
                for o in options {
                    if let Some(&p) = probabilities.get(&o.name)
                        && best.is_none_or(|(_, b)| p > b)
                    {
                        best = Some((&o.name, p));
                    }
                }
                let value = best.map(|(n, _)| n.to_string()).unwrap_or_default();
                Ok(Answer::Choice { value, probabilities })
            }
            other => Err(format!("expected one of: {}, got {other}", names(options))),
        },
        Question::YesNo { .. } => {
            let p = match value {
                Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                Value::Number(n) => n.as_f64(),
                Value::String(s) => {
                    let s = clean(s).to_ascii_lowercase();
                    match s.as_str() {
                        "yes" => Some(1.0),
                        "no" => Some(0.0),
                        other => other.parse::<f64>().ok(),
                    }
                }
                _ => None,
            };
            match p {
                Some(p) if unit(p) => Ok(Answer::YesNo { probability: p }),
                _ => Err(format!("expected yes, no or a probability between 0 and 1, got {value}")),
            }
        }
        Question::Scale { levels, .. } => {
            let top = (levels.len() - 1) as f64;
            let one_hot = |i: usize| Answer::Scale {
                mean: i as f64,
                probabilities: (0..levels.len()).map(|j| if i == j { 1.0 } else { 0.0 }).collect(),
            };
            match value {
                Value::String(s) => {
                    let s = clean(s);
                    levels
                        .iter()
                        .position(|l| l.name == s)
                        .or_else(|| levels.iter().position(|l| l.name.eq_ignore_ascii_case(s)))
                        .map(one_hot)
                        .ok_or_else(|| format!("`{s}` is not one of the levels: {}", names(levels)))
                }
                Value::Number(n) => match n.as_f64() {
                    Some(m) if (0.0..=top).contains(&m) && m.fract() == 0.0 => Ok(one_hot(m as usize)),
                    Some(m) if (0.0..=top).contains(&m) => Ok(Answer::Scale { mean: m, probabilities: Vec::new() }),
                    _ => Err(format!("the mean level must be between 0 and {top}, got {n}")),
                },
                Value::Array(items) if items.len() == levels.len() => {
                    let ps: Option<Vec<f64>> = items.iter().map(|v| v.as_f64().filter(|p| unit(*p))).collect();
                    let Some(ps) = ps else {
                        return Err(format!("level probabilities must be numbers between 0 and 1, got {value}"));
                    };
                    let total: f64 = ps.iter().sum();
                    if total <= 0.0 {
                        return Err("the level probabilities sum to 0".to_string());
                    }
                    let mean = ps.iter().enumerate().map(|(i, p)| i as f64 * p).sum::<f64>() / total;
                    Ok(Answer::Scale { mean, probabilities: ps })
                }
                other => Err(format!("expected one of the levels: {}, got {other}", names(levels))),
            }
        }
    }
}

/// Reads the answers to `request` from `value`: an object with one answer per question name, or — for a
/// request with one question — the answer itself. `Err((question, message))` on the first that cannot be
/// read.
fn read_answers(request: &DecisionRequest, value: &Value) -> Result<BTreeMap<String, Answer>, (String, String)> {
    let per_question = match value {
        Value::Object(map) => !map.is_empty() && map.keys().all(|k| request.get(k).is_some()),
        _ => false,
    };
    if !per_question {
        if let [(name, q)] = request.questions.as_slice() {
            let a = read_answer(q, value).map_err(|m| (name.clone(), m))?;
            return Ok(BTreeMap::from([(name.clone(), a)]));
        }
        let first = request.questions.first().map(|(n, _)| n.clone()).unwrap_or_default();
        let list: Vec<&str> = request.questions.iter().map(|(n, _)| n.as_str()).collect();
        return Err((first, format!("expected a JSON object with one answer per question ({})", list.join(", "))));
    }
    let mut out = BTreeMap::new();
    for (name, q) in &request.questions {
        let Some(v) = value.get(name) else { return Err((name.clone(), "no answer".to_string())) };
        out.insert(name.clone(), read_answer(q, v).map_err(|m| (name.clone(), m))?);
    }
    Ok(out)
}

#[derive(Debug, Default)]
struct DecisionScript {
    decisions: VecDeque<Value>,
    used: usize,
    requests: Vec<DecisionRequest>,
}

/// A decision model giving canned decisions, in order, and recording every request. Clones share the script.
///
/// Each decision answers one request: an object with one answer per question name, or, for a request with
/// one question, the answer itself. Answers are read as a model's: a choice is an option name or an object
/// option → probability; a yes/no answer is `yes`/`no`, a boolean or a probability of yes; a scale answer is
/// a level name, a mean level index or a list of level probabilities. When the decisions are used up, every
/// call fails with [`ModelError::ScriptExhausted`].
#[derive(Debug, Clone)]
pub struct ScriptedDecisionModel {
    script: Arc<Mutex<DecisionScript>>,
    name: Arc<str>,
}

impl ScriptedDecisionModel {
    /// A model giving `decisions` in order.
    pub fn new(decisions: impl IntoIterator<Item = Value>) -> Self {
        let script = DecisionScript { decisions: decisions.into_iter().collect(), ..DecisionScript::default() };
        ScriptedDecisionModel { script: Arc::new(Mutex::new(script)), name: Arc::from("scripted") }
    }

    /// Names the model (default `scripted`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Arc::from(name.into());
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<DecisionRequest> {
        crate::lock(&self.script).requests.clone()
    }

    /// Decisions given so far.
    pub fn used(&self) -> usize {
        crate::lock(&self.script).used
    }

    /// Decisions left.
    pub fn remaining(&self) -> usize {
        crate::lock(&self.script).decisions.len()
    }
}

impl DecisionModel for ScriptedDecisionModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&self, request: DecisionRequest) -> BoxFuture<'_, Result<DecisionResponse, DecisionError>> {
        Box::pin(async move {
            let decision = {
                let mut s = crate::lock(&self.script);
                s.requests.push(request.clone());
                let d = s.decisions.pop_front().ok_or(ModelError::ScriptExhausted { used: s.used })?;
                s.used += 1;
                d
            };
            let answers =
                read_answers(&request, &decision).map_err(|(question, message)| DecisionError::InvalidAnswer {
                    model: self.name.to_string(),
                    question,
                    message,
                    reply: decision.to_string(),
                    spent: Spent::default(),
                })?;
            Ok(DecisionResponse { answers, usage: TokenUsage::default(), model: self.name.to_string(), cost_usd: None })
        })
    }
}

/// The system message of [`ChatDecisionModel`].
pub const DECISION_SYSTEM_PROMPT: &str = "You answer questions about an input. Answer every question with one \
     of its allowed answers, in a JSON object with one property per question name.";

/// A decision model over a chat model (see the [module](self) docs).
///
/// Defaults: asks for the 5 most likely alternatives per token (`logprobs`), feeds an unreadable answer back
/// at most twice, temperature 0.
#[derive(Debug, Clone)]
pub struct ChatDecisionModel {
    model: ChatModelRef,
    top_logprobs: Option<u8>,
    max_retries: u32,
    name: String,
}

impl ChatDecisionModel {
    /// Decisions by `model`, with the defaults above.
    pub fn new(model: impl Into<ChatModelRef>) -> Self {
        let model = model.into();
        // The provider's model name: what a topology's `decision_model` shows (a stored run's fingerprint holds
        // it); the answers name the model by its label.
        let name = model.info().model.clone();
        ChatDecisionModel { model, top_logprobs: Some(5), max_retries: 2, name }
    }

    /// Asks for `top` alternatives per token (at most 20), or with `None` for no log-probabilities (for
    /// servers that reject the option).
    pub fn top_logprobs(mut self, top: Option<u8>) -> Self {
        self.top_logprobs = top.map(|t| t.min(20));
        self
    }

    /// How many times an unreadable answer is fed back before failing (default 2).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The user message asking `request`'s questions.
    pub fn prompt(request: &DecisionRequest) -> String {
        let input = match &request.input {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut s = format!("Input:\n{input}\n\nQuestions:");
        let list = |s: &mut String, title: &str, items: &[DecisionOption]| {
            s.push_str(&format!("\n  {title}:"));
            for o in items {
                if o.description.is_empty() {
                    s.push_str(&format!("\n  - {}", o.name));
                } else {
                    s.push_str(&format!("\n  - {}: {}", o.name, o.description));
                }
            }
        };
        for (name, q) in &request.questions {
            s.push_str(&format!("\n- {name}: {}", q.text()));
            match q {
                Question::Choice { options, .. } => list(&mut s, "Options (answer with one name)", options),
                Question::YesNo { yes_when, no_when, .. } => {
                    s.push_str(" (answer yes or no)");
                    if let Some(y) = yes_when {
                        s.push_str(&format!("\n  Yes when: {y}"));
                    }
                    if let Some(n) = no_when {
                        s.push_str(&format!("\n  No when: {n}"));
                    }
                }
                Question::Scale { levels, .. } => {
                    list(&mut s, "Levels from lowest to highest (answer with one name)", levels)
                }
            }
        }
        let shape: Map<String, Value> =
            request.questions.iter().map(|(n, _)| (n.clone(), Value::String("<answer>".into()))).collect();
        s.push_str(&format!("\n\nAnswer with a JSON object only: {}", Value::Object(shape)));
        s
    }

    /// The JSON schema of the answer: an object with one required string property per question, restricted
    /// to the question's allowed answers.
    pub fn schema(request: &DecisionRequest) -> Value {
        let properties: Map<String, Value> = request
            .questions
            .iter()
            .map(|(n, q)| (n.clone(), json!({"type": "string", "enum": q.allowed()})))
            .collect();
        let required: Vec<&str> = request.questions.iter().map(|(n, _)| n.as_str()).collect();
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }

    /// Reads a reply: the answers, refined with the probabilities in `logprobs` when given.
    fn read(
        request: &DecisionRequest,
        reply: &str,
        logprobs: Option<&[TokenLogprob]>,
    ) -> Result<BTreeMap<String, Answer>, (String, String)> {
        let value = match extract_json(reply) {
            Ok(v) => v,
            Err(e) if request.questions.len() == 1 => {
                let _ = e;
                Value::String(reply.to_string())
            }
            Err(e) => {
                let first = request.questions.first().map(|(n, _)| n.clone()).unwrap_or_default();
                return Err((first, format!("the answer is not valid JSON ({e})")));
            }
        };
        let mut answers = read_answers(request, &value)?;
        let Some(tokens) = logprobs else { return Ok(answers) };
        for (name, q) in &request.questions {
            let Some(start) = value_start(reply, name) else { continue };
            let allowed = q.allowed();
            let Some(ps) = distribution(tokens, reply, start, &allowed) else { continue };
            let refined = match (q, answers.get(name)) {
                (Question::Choice { .. }, Some(Answer::Choice { value, .. })) => Answer::Choice {
                    value: value.clone(),
                    probabilities: allowed.iter().cloned().zip(ps.iter().copied()).collect(),
                },
                (Question::YesNo { .. }, _) => Answer::YesNo { probability: ps[0] },
                (Question::Scale { .. }, _) => {
                    Answer::Scale { mean: ps.iter().enumerate().map(|(i, p)| i as f64 * p).sum(), probabilities: ps }
                }
                _ => continue,
            };
            answers.insert(name.clone(), refined);
        }
        Ok(answers)
    }
}

/// The byte offset in `reply` where the string value of property `name` starts (after its opening quote).
pub(crate) fn value_start(reply: &str, name: &str) -> Option<usize> {
    let key = format!("\"{name}\"");
    let mut from = 0;
    while let Some(at) = reply[from..].find(&key) {
        let after = from + at + key.len();
        let rest = reply[after..].trim_start();
        if let Some(rest) = rest.strip_prefix(':') {
            let rest2 = rest.trim_start();
            if let Some(value) = rest2.strip_prefix('"') {
                return Some(reply.len() - value.len());
            }
        }
        from = after;
    }
    None
}

/// The probability of each of `allowed` read from the alternatives of the token where the answer starting at
/// byte `start` of `text` begins: an alternative's text after the part of the token that precedes the answer
/// is matched against the allowed answers (an alternative closing the string must match exactly, else it
/// must be a prefix; an alternative matching several answers splits its probability between them). `None`
/// when the tokens do not spell `text`, the position has no alternatives matching an answer, or all mass is
/// zero. The result is normalised over the allowed answers.
pub(crate) fn distribution(tokens: &[TokenLogprob], text: &str, start: usize, allowed: &[String]) -> Option<Vec<f64>> {
    let spelled: String = tokens.iter().map(|t| t.token.as_str()).collect();
    if spelled != text {
        return None;
    }
    let mut at = 0;
    let mut found = None;
    for t in tokens {
        let end = at + t.token.len();
        if at <= start && start < end {
            found = Some((t, &text[at..start]));
            break;
        }
        at = end;
    }
    let (token, prefix) = found?;
    let alternatives: Vec<(&str, f64)> = if token.top.is_empty() {
        vec![(token.token.as_str(), token.logprob)]
    } else {
        token.top.iter().map(|a| (a.token.as_str(), a.logprob)).collect()
    };
    let mut mass = vec![0.0; allowed.len()];
    for (alt, logprob) in alternatives {
        let Some(rest) = alt.strip_prefix(prefix) else { continue };
        let (head, closed) = match rest.find('"') {
            Some(q) => (&rest[..q], true),
            None => (rest, false),
        };
        if head.is_empty() {
            continue;
        }
        let matching: Vec<usize> = allowed
            .iter()
            .enumerate()
            .filter(|(_, a)| if closed { a.as_str() == head } else { a.starts_with(head) })
            .map(|(i, _)| i)
            .collect();
        if matching.is_empty() {
            continue;
        }
        let share = logprob.exp() / matching.len() as f64;
        for i in matching {
            mass[i] += share;
        }
    }
    let total: f64 = mass.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    Some(mass.into_iter().map(|m| m / total).collect())
}

/// A decision model chosen per invocation ([`DecisionModelRef::choosing`]): it answers nothing itself.
struct ChosenDecision {
    choice: crate::model::ModelChoice<DecisionModelRef>,
}

impl DecisionModel for ChosenDecision {
    fn name(&self) -> &str {
        self.choice.default_name()
    }

    fn decide(&self, _request: DecisionRequest) -> BoxFuture<'_, Result<DecisionResponse, DecisionError>> {
        let message = format!(
            "the decision model is chosen per invocation among {}: it must be resolved over the state \
             (`DecisionModelRef::decide_in`) before it is asked",
            self.choice.names().join(", ")
        );
        Box::pin(async move { Err(DecisionError::InvalidRequest(message)) })
    }

    fn for_invocation<'a>(
        &'a self,
        ctx: &'a InvocationContext,
    ) -> BoxFuture<'a, Result<Option<DecisionModelRef>, Stop>> {
        Box::pin(async move { Ok(Some(self.choice.pick(ctx).await?.1)) })
    }
}

impl DecisionModel for ChatDecisionModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn for_invocation<'a>(
        &'a self,
        ctx: &'a InvocationContext,
    ) -> BoxFuture<'a, Result<Option<DecisionModelRef>, Stop>> {
        Box::pin(async move {
            if self.model.choice().is_none() {
                return Ok(None);
            }
            let model = self.model.for_invocation(ctx).await?;
            let name = model.info().model.clone();
            Ok(Some(DecisionModelRef::new(ChatDecisionModel { model, name, ..self.clone() })))
        })
    }

    fn decide(&self, request: DecisionRequest) -> BoxFuture<'_, Result<DecisionResponse, DecisionError>> {
        Box::pin(async move {
            let mut messages =
                vec![ChatMessage::system(DECISION_SYSTEM_PROMPT), ChatMessage::user(Self::prompt(&request))];
            let mut usage = TokenUsage::default();
            let mut attempt = 0;
            let info = self.model.info();
            loop {
                let mut chat = ChatRequest::new(messages.clone()).temperature(0.0);
                if info.json_schema {
                    chat = chat.response_format(ResponseFormat::JsonSchema {
                        name: "decision".to_string(),
                        schema: Self::schema(&request),
                        strict: true,
                    });
                }
                chat.logprobs = self.top_logprobs;
                let response = self.model.chat(chat).await?;
                usage.input += response.usage.input;
                usage.output += response.usage.output;
                let reply = response.text().to_string();
                match Self::read(&request, &reply, response.logprobs.as_deref()) {
                    Ok(answers) => {
                        let model = info.label().to_string();
                        let cost_usd = info.prices.map(|p| p.cost(usage.input, usage.output));
                        return Ok(DecisionResponse { answers, usage, model, cost_usd });
                    }
                    Err((question, message)) if attempt >= self.max_retries => {
                        let cost_usd = info.prices.map(|p| p.cost(usage.input, usage.output));
                        return Err(DecisionError::InvalidAnswer {
                            model: info.label().to_string(),
                            question,
                            message,
                            reply,
                            spent: Spent { usage, cost_usd },
                        });
                    }
                    Err((question, message)) => {
                        attempt += 1;
                        messages.push(ChatMessage::assistant(reply));
                        messages.push(ChatMessage::user(format!(
                            "Invalid answer to `{question}`: {message}. Answer again with a JSON object only."
                        )));
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChatModel, ChatResponse, FinishReason, ModelInfo, ScriptedModel, TopLogprob};

    fn experts() -> DecisionRequest {
        DecisionRequest::new(json!({"request": "I broke my leg"})).question(
            "agent",
            Question::choice("Which agent?", [("legal", "Law"), ("medical", "Health"), ("technical", "Computers")]),
        )
    }

    #[tokio::test]
    async fn scripted_decisions_are_read_and_checked() {
        let m = ScriptedDecisionModel::new([
            json!("Medical"),
            json!({"legal": 0.2, "medical": 0.7, "technical": 0.1}),
            json!("finance"),
        ]);
        let model = DecisionModelRef::new(m.clone());
        let r = model.decide(experts()).await.expect("first");
        assert_eq!(r.choice("agent").expect("choice"), "medical");
        assert!(r.choice_probabilities("agent").expect("probabilities").is_empty());
        let r = model.decide(experts()).await.expect("second");
        assert_eq!(r.choice("agent").expect("choice"), "medical");
        assert_eq!(r.choice_probabilities("agent").expect("probabilities").get("legal"), Some(&0.2));
        let e = model.decide(experts()).await.expect_err("third");
        assert_eq!(
            e.to_string(),
            "decision model `scripted`: invalid answer to `agent`: `finance` is not one of: legal, medical, \
             technical; the model replied: \"finance\""
        );
        let e = model.decide(experts()).await.expect_err("exhausted");
        assert_eq!(e.to_string(), "scripted model: no reply left (3 used)");
        assert_eq!(m.requests().len(), 4);
    }

    #[tokio::test]
    async fn several_questions_yes_no_and_scale() {
        let request = DecisionRequest::new("Angry customer, payouts failing")
            .question("urgent", Question::yes_no("Urgent?"))
            .question("mood", Question::scale("Mood?", [("calm", ""), ("frustrated", ""), ("angry", "")]));
        let m = DecisionModelRef::new(ScriptedDecisionModel::new([
            json!({"urgent": "yes", "mood": "angry"}),
            json!({"urgent": 0.25, "mood": [0.0, 0.5, 0.5]}),
            json!({"urgent": true}),
        ]));
        let r = m.decide(request.clone()).await.expect("first");
        assert_eq!((r.yes_no("urgent").expect("yes/no"), r.scale("mood").expect("scale")), (1.0, 2.0));
        let r = m.decide(request.clone()).await.expect("second");
        assert_eq!((r.yes_no("urgent").expect("yes/no"), r.scale("mood").expect("scale")), (0.25, 1.5));
        let e = m.decide(request).await.expect_err("missing");
        assert!(e.to_string().contains("invalid answer to `mood`: no answer"), "{e}");
        let r = DecisionResponse {
            answers: BTreeMap::from([("urgent".to_string(), Answer::YesNo { probability: 0.5 })]),
            usage: TokenUsage::default(),
            model: "m".into(),
            cost_usd: None,
        };
        assert_eq!(
            r.choice("urgent").expect_err("kind").to_string(),
            "the answer to `urgent` is a yes/no answer, not a choice one"
        );
        assert_eq!(r.scale("mood").expect_err("none").to_string(), "no answer to `mood`");
    }

    #[tokio::test]
    async fn invalid_requests_never_call_the_model() {
        let m = ScriptedDecisionModel::new([json!("x")]);
        let model = DecisionModelRef::new(m.clone());
        let e = model.decide(DecisionRequest::new("x")).await.expect_err("no questions");
        assert_eq!(e.to_string(), "invalid decision request: a decision request needs at least one question");
        let r = DecisionRequest::new("x").question("s", Question::scale("?", [("only", "")]));
        let e = model.decide(r).await.expect_err("one level");
        assert_eq!(e.to_string(), "invalid decision request: scale question `s` needs at least 2 level(s), found 1");
        let r = DecisionRequest::new("x").question("a", Question::yes_no("?")).question("a", Question::yes_no("?"));
        assert!(model.decide(r).await.is_err());
        assert_eq!(m.used(), 0);
    }

    #[tokio::test]
    async fn a_chat_model_answers_in_json_and_is_corrected() {
        let chat = ScriptedModel::new(["```json\n{\"agent\": \"finance\"}\n```", "{\"agent\": \"medical\"}"]);
        let model = DecisionModelRef::from(ChatModelRef::new(chat.clone()));
        let r = model.decide(experts()).await.expect("decision");
        assert_eq!(r.choice("agent").expect("choice"), "medical");
        let requests = chat.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].messages[0].text(), DECISION_SYSTEM_PROMPT);
        assert_eq!(
            requests[0].messages[1].text(),
            "Input:\n{\"request\":\"I broke my leg\"}\n\nQuestions:\n- agent: Which agent?\n  Options (answer with \
             one name):\n  - legal: Law\n  - medical: Health\n  - technical: Computers\n\nAnswer with a JSON object \
             only: {\"agent\":\"<answer>\"}"
        );
        assert_eq!(requests[0].logprobs, Some(5));
        assert_eq!(requests[0].response_format, None, "the scripted chat model does not honour schemas");
        assert_eq!(
            requests[1].messages[3].text(),
            "Invalid answer to `agent`: `finance` is not one of: legal, medical, technical. Answer again with a JSON \
             object only."
        );
        // One question: free text is read too.
        let chat = ScriptedModel::new(["\"Technical.\""]);
        let r = DecisionModelRef::from(ChatModelRef::new(chat)).decide(experts()).await.expect("decision");
        assert_eq!(r.choice("agent").expect("choice"), "technical");
    }

    /// A chat model returning a fixed reply with fixed log-probabilities and a JSON-schema capability.
    struct Fixed {
        info: ModelInfo,
        reply: String,
        logprobs: Vec<TokenLogprob>,
        seen: Arc<Mutex<Vec<ChatRequest>>>,
    }

    impl ChatModel for Fixed {
        fn info(&self) -> &ModelInfo {
            &self.info
        }

        async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
            crate::lock(&self.seen).push(request);
            Ok(ChatResponse {
                message: ChatMessage::assistant(self.reply.clone()),
                usage: TokenUsage { input: 10, output: 5 },
                finish_reason: FinishReason::Stop,
                logprobs: Some(self.logprobs.clone()),
            })
        }
    }

    fn tok(token: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: token.to_string(),
            logprob,
            top: top.iter().map(|(t, l)| TopLogprob { token: t.to_string(), logprob: *l }).collect(),
        }
    }

    #[tokio::test]
    async fn probabilities_come_from_the_token_alternatives() {
        // {"legal":"yes","medical":"no"} with the answer tokens' alternatives.
        let reply = r#"{"legal":"yes","medical":"no"}"#;
        let logprobs = vec![
            tok("{\"", -0.01, &[]),
            tok("legal", -0.01, &[]),
            tok("\":\"", -0.01, &[]),
            tok("yes", 0.8f64.ln(), &[("yes", 0.8f64.ln()), ("no", 0.2f64.ln())]),
            tok("\",\"", -0.01, &[]),
            tok("medical", -0.01, &[]),
            tok("\":\"", -0.01, &[]),
            tok("no", 0.6f64.ln(), &[("no", 0.6f64.ln()), ("y", 0.3f64.ln()), ("maybe", 0.1f64.ln())]),
            tok("\"}", -0.01, &[]),
        ];
        let seen = Arc::new(Mutex::new(Vec::new()));
        let fixed = Fixed {
            info: ModelInfo {
                provider: "fixed".into(),
                server: "fixed".into(),
                model: "fixed-1".into(),
                json_schema: true,
                tools: false,
                prices: None,
                limits: Default::default(),
                name: None,
            },
            reply: reply.to_string(),
            logprobs,
            seen: seen.clone(),
        };
        let request = DecisionRequest::new("x")
            .question("legal", Question::yes_no("Legal?"))
            .question("medical", Question::yes_no("Medical?"));
        let r = DecisionModelRef::from(ChatModelRef::new(fixed)).decide(request.clone()).await.expect("decision");
        let round = |p: f64| (p * 1e9).round() / 1e9;
        assert_eq!(round(r.yes_no("legal").expect("legal")), 0.8);
        assert_eq!(round(r.yes_no("medical").expect("medical")), round(0.3 / 0.9));
        assert_eq!(r.usage, TokenUsage { input: 10, output: 5 });
        assert_eq!(r.model, "fixed-1");
        let sent = crate::lock(&seen)[0].clone();
        assert_eq!(
            sent.response_format,
            Some(ResponseFormat::JsonSchema {
                name: "decision".into(),
                schema: json!({"type": "object", "properties": {
                    "legal": {"type": "string", "enum": ["yes", "no"]},
                    "medical": {"type": "string", "enum": ["yes", "no"]}},
                    "required": ["legal", "medical"], "additionalProperties": false}),
                strict: true,
            })
        );
        assert_eq!(sent.temperature, Some(0.0));
    }

    #[test]
    fn a_token_holding_the_quote_and_shared_prefixes() {
        let text = r#"{"agent": "medical"}"#;
        let tokens = vec![
            tok("{\"agent\":", 0.0, &[]),
            tok(" \"med", 0.7f64.ln(), &[(" \"med", 0.7f64.ln()), (" \"le", 0.2f64.ln()), (" \"t", 0.1f64.ln())]),
            tok("ical\"}", 0.0, &[]),
        ];
        let allowed = vec!["legal".to_string(), "medical".to_string(), "technical".to_string()];
        let start = value_start(text, "agent").expect("start");
        assert_eq!(&text[start..], "medical\"}");
        let ps = distribution(&tokens, text, start, &allowed).expect("distribution");
        let ps: Vec<f64> = ps.iter().map(|p| (p * 1e9).round() / 1e9).collect();
        assert_eq!(ps, vec![0.2, 0.7, 0.1]);
        // Tokens that do not spell the text give no distribution.
        assert_eq!(distribution(&tokens[..2], text, start, &allowed), None);
    }
}
