//! Chat models: the [`ChatModel`] trait (native async) with its object-safe companion [`DynChatModel`], the
//! shared handle [`ChatModelRef`], and the providers: [`OpenAiModel`] (any OpenAI-compatible server) and
//! [`ScriptedModel`] (canned replies for tests and demos).
//!
//! A provider implements [`ChatModel::chat`] (one request, one complete answer) and may implement
//! [`ChatModel::chat_stream`] (token and tool-call deltas, then the complete answer); the default streams the
//! complete answer as one token. [`ModelInfo`] says what the provider supports so that callers (the LLM
//! agent) choose between the provider's JSON-schema response format and lenient parsing.
//!
//! Follows the chat model layer of LangChain4j (messages, request parameters, response with token usage and
//! finish reason, streaming handler); the trait split and error type are ours.
//!
//! ```
//! use agentic_agents::model::{ChatMessage, ChatModelRef, ChatRequest, ScriptedModel};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let scripted = ScriptedModel::new(["Hello!"]);
//! let model = ChatModelRef::new(scripted.clone());
//! let answer = model.chat(ChatRequest::new(vec![ChatMessage::user("Hi")])).await?;
//! assert_eq!(answer.text(), "Hello!");
//! assert_eq!(scripted.requests().len(), 1);
//! # Ok(()) }
//! ```

mod call;
mod choice;
mod error;
mod local;
mod openai;
mod scripted;
mod span;
mod types;

use std::future::Future;
use std::sync::Arc;

use agentic_engine::{InvocationContext, Stop};
use futures::future::BoxFuture;
use futures::stream::BoxStream;

pub(crate) use call::report_rate_limited;
pub use call::{ModelCall, call_model, recorded_request, request_options};
pub use choice::{ChooseFn, ModelChoice, usage_value};
pub use error::ModelError;
pub(crate) use error::shorten as shorten_text;
pub use local::{
    DEFAULT_LOCAL_MAX_TOKENS, DEFAULT_LOCAL_MODEL_FILE, KNOWN_LOCAL_MODELS, KnownLocalModel, LOCAL_PROVIDER_BUILT,
    default_local_model_path, local_model, local_model_dir,
};
#[cfg(feature = "local")]
pub use local::{LocalModel, LocalStats};
pub use openai::{DEFAULT_BASE_URL, DEFAULT_OPENAI_MODEL, OpenAiBuilder, OpenAiModel};
pub use scripted::{ScriptedModel, ScriptedReply};
pub use types::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, ResponseFormat, StreamEvent, TokenLogprob, ToolCall,
    ToolChoice, ToolSpec, TopLogprob,
};

/// A streamed answer: [`StreamEvent::Token`] and [`StreamEvent::ToolCallDelta`] events, then exactly one
/// [`StreamEvent::Done`] with the assembled answer (or an error, which ends the stream).
pub type ChatStream = BoxStream<'static, Result<StreamEvent, ModelError>>;

/// What a model is and what it supports.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// Provider name (`openai`, `scripted`, `local`, ...).
    pub provider: String,
    /// Where it runs: the base URL for servers, the provider name for in-process models.
    pub server: String,
    /// The model name.
    pub model: String,
    /// Whether [`ResponseFormat::JsonSchema`] is honoured (else callers parse free text leniently).
    pub json_schema: bool,
    /// Whether tool calling is supported.
    pub tools: bool,
    /// What its tokens cost (SPEC.md §3 `prices`; [`ChatModelRef::with_prices`]): without, calls are not costed.
    pub prices: Option<agentic_engine::budget::Prices>,
    /// The rate limits of its endpoint (SPEC.md §3 `limits`; [`ChatModelRef::with_limits`]).
    pub limits: agentic_engine::limits::ModelLimits,
    /// The name the program knows the model by, when it gives one ([`ChatModelRef::named`]): a spec's
    /// `models` entry. What usage, step records, `show`, reports and the `chat` span call the model
    /// ([`ModelInfo::label`]); requests still carry [`ModelInfo::model`].
    pub name: Option<String>,
}

impl ModelInfo {
    /// What records and reports call the model: its [`ModelInfo::name`] when it has one (a spec's `models`
    /// entry), else the provider's model name.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.model)
    }
}

/// A chat model: messages in, an assistant message out.
///
/// Native async; store models as [`ChatModelRef`] (`Arc<dyn DynChatModel>`), which every `ChatModel` converts
/// into.
pub trait ChatModel: Send + Sync + 'static {
    /// What the model is and supports.
    fn info(&self) -> &ModelInfo;

    /// Sends `request` and returns the complete answer.
    ///
    /// # Errors
    /// [`ModelError`] naming the server and the model.
    fn chat(&self, request: ChatRequest) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send;

    /// Sends `request` and streams the answer. The default calls [`ChatModel::chat`] and streams its text as
    /// one token, then the answer.
    ///
    /// # Errors
    /// [`ModelError`] when the request fails before streaming starts; later failures end the stream with an
    /// error item.
    fn chat_stream(&self, request: ChatRequest) -> impl Future<Output = Result<ChatStream, ModelError>> + Send {
        async move {
            let response = self.chat(request).await?;
            let mut events = Vec::with_capacity(2);
            if !response.text().is_empty() {
                events.push(Ok(StreamEvent::Token(response.text().to_string())));
            }
            events.push(Ok(StreamEvent::Done(response)));
            Ok(Box::pin(futures::stream::iter(events)) as ChatStream)
        }
    }

    /// The answer this model gave earlier to `request` was used instead of asking it again: a resumed
    /// agent's loop replayed a model turn from the run's journal (SPEC.md §4). Nothing by default; a scripted
    /// model that was not asked `request` in this process moves past the reply that answered it in another
    /// one, so that its script continues where the conversation is.
    fn turn_replayed(&self, request: &ChatRequest) {
        let _ = request;
    }

    /// Gets the model ready to answer, so that the first request does not pay for it: the local provider loads
    /// its model file. Nothing by default.
    ///
    /// # Errors
    /// [`ModelError`] when the model cannot be made ready (a missing model file), naming it.
    fn prepare(&self) -> impl Future<Output = Result<(), ModelError>> + Send {
        async { Ok(()) }
    }

    /// The choice this model stands for when it is chosen per invocation ([`ChatModelRef::choosing`]): such a
    /// model is resolved against the state before it is called ([`ChatModelRef::for_invocation`]). `None` —
    /// the default — for every model that answers itself.
    fn choice(&self) -> Option<&ModelChoice<ChatModelRef>> {
        None
    }
}

/// Object-safe companion of [`ChatModel`], implemented for every `ChatModel`.
pub trait DynChatModel: Send + Sync + 'static {
    /// What the model is and supports.
    fn info(&self) -> &ModelInfo;

    /// [`ChatModel::chat`], boxed.
    fn chat_dyn(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, ModelError>>;

    /// [`ChatModel::chat_stream`], boxed.
    fn chat_stream_dyn(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, ModelError>>;

    /// [`ChatModel::turn_replayed`].
    fn turn_replayed_dyn(&self, request: &ChatRequest);

    /// [`ChatModel::prepare`], boxed.
    fn prepare_dyn(&self) -> BoxFuture<'_, Result<(), ModelError>>;

    /// [`ChatModel::choice`].
    fn choice_dyn(&self) -> Option<&ModelChoice<ChatModelRef>>;
}

impl<M: ChatModel> DynChatModel for M {
    fn info(&self) -> &ModelInfo {
        ChatModel::info(self)
    }

    fn chat_dyn(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, ModelError>> {
        Box::pin(self.chat(request))
    }

    fn chat_stream_dyn(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, ModelError>> {
        Box::pin(self.chat_stream(request))
    }

    fn turn_replayed_dyn(&self, request: &ChatRequest) {
        self.turn_replayed(request);
    }

    fn prepare_dyn(&self) -> BoxFuture<'_, Result<(), ModelError>> {
        Box::pin(self.prepare())
    }

    fn choice_dyn(&self) -> Option<&ModelChoice<ChatModelRef>> {
        self.choice()
    }
}

/// A shared reference to a chat model: what the LLM agent and the spec hold. Cloning is cheap.
#[derive(Clone)]
pub struct ChatModelRef(pub Arc<dyn DynChatModel>);

impl std::fmt::Debug for ChatModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.info();
        write!(f, "ChatModelRef({} `{}` at {})", info.provider, info.model, info.server)
    }
}

impl ChatModelRef {
    /// Wraps a model.
    pub fn new(model: impl ChatModel) -> Self {
        ChatModelRef(Arc::new(model))
    }

    /// What the model is and supports.
    pub fn info(&self) -> &ModelInfo {
        self.0.info()
    }

    /// Gets the model ready to answer ([`ChatModel::prepare`]): the local provider loads its model file.
    ///
    /// # Errors
    /// [`ModelError`] when the model cannot be made ready, naming it.
    pub async fn prepare(&self) -> Result<(), ModelError> {
        self.0.prepare_dyn().await
    }

    /// Tells the model that one of its earlier answers was replayed from a run's journal
    /// ([`ChatModel::turn_replayed`]).
    pub fn turn_replayed(&self, request: &ChatRequest) {
        self.0.turn_replayed_dyn(request);
    }

    /// This model with what its tokens cost (SPEC.md §3 `prices`): its calls' cost is counted, in the
    /// journal's usage and against `cost_usd` budgets.
    pub fn with_prices(self, prices: agentic_engine::budget::Prices) -> Self {
        let mut info = self.info().clone();
        info.prices = Some(prices);
        ChatModelRef::new(Described { inner: self, info })
    }

    /// This model known by `name` ([`ModelInfo::name`]; a spec names each model after its `models` entry):
    /// usage, step records, reports and the `chat` span call it so, requests still name the provider's model.
    pub fn named(self, name: impl Into<String>) -> Self {
        let mut info = self.info().clone();
        info.name = Some(name.into());
        ChatModelRef::new(Described { inner: self, info })
    }

    /// A model chosen per invocation among `choice`'s models (SPEC.md §7): agents holding it resolve it over
    /// the state when they are invoked ([`ChatModelRef::for_invocation`]). It reports its default model's
    /// [`ModelInfo`]; called without being resolved it fails with [`ModelError::InvalidRequest`].
    pub fn choosing(choice: ModelChoice<ChatModelRef>) -> Self {
        let info = choice.default_model().map(|m| m.info().clone()).unwrap_or_else(|| ModelInfo {
            provider: "choice".to_string(),
            server: "choice".to_string(),
            model: choice.default_name().to_string(),
            json_schema: false,
            tools: true,
            prices: None,
            limits: Default::default(),
            name: Some(choice.default_name().to_string()),
        });
        ChatModelRef::new(Chosen { choice, info })
    }

    /// The choice this model stands for, when it is chosen per invocation ([`ChatModelRef::choosing`]).
    pub fn choice(&self) -> Option<&ModelChoice<ChatModelRef>> {
        self.0.choice_dyn()
    }

    /// The model to call in `ctx`'s invocation: this one, or — for a model chosen per invocation — the one its
    /// choice gives over the state ([`ModelChoice::pick`]).
    ///
    /// # Errors
    /// As [`ModelChoice::pick`]: the choice's expression fails, or gives a name that is not among its models.
    pub async fn for_invocation(&self, ctx: &InvocationContext) -> Result<ChatModelRef, Stop> {
        match self.choice() {
            None => Ok(self.clone()),
            Some(choice) => Ok(choice.pick(ctx).await?.1),
        }
    }

    /// This model under the rate limits of its endpoint (SPEC.md §3 `limits`), shared by every model of the
    /// same provider, server and name in the process and, on a shared store, by every server.
    pub fn with_limits(self, limits: agentic_engine::limits::ModelLimits) -> Self {
        let mut info = self.info().clone();
        info.limits = limits;
        ChatModelRef::new(Described { inner: self, info })
    }

    /// Sends `request` and returns the complete answer, in a `chat` span (the OpenTelemetry GenAI inference
    /// span: model, provider, server, tokens, finish reason; docs/telemetry.md).
    ///
    /// # Errors
    /// As [`ChatModel::chat`].
    pub async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let span = span::chat_span(self.info(), &request, false);
        let result = tracing::Instrument::instrument(self.0.chat_dyn(request), span.clone()).await;
        match &result {
            Ok(response) => span::record_response(&span, response),
            Err(e) => span::record_error(&span, e),
        }
        result
    }

    /// Sends `request` and streams the answer, in a `chat` span that ends with the stream (as
    /// [`ChatModelRef::chat`]'s, with `gen_ai.request.stream`).
    ///
    /// # Errors
    /// As [`ChatModel::chat_stream`].
    pub async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        use futures::StreamExt;
        let span = span::chat_span(self.info(), &request, true);
        let stream = match tracing::Instrument::instrument(self.0.chat_stream_dyn(request), span.clone()).await {
            Ok(stream) => stream,
            Err(e) => {
                span::record_error(&span, &e);
                return Err(e);
            }
        };
        if span.is_disabled() {
            return Ok(stream);
        }
        // The span lives in the stream: it ends when the stream is dropped.
        Ok(Box::pin(stream.map(move |event| {
            match &event {
                Ok(StreamEvent::Done(response)) => span::record_response(&span, response),
                Err(e) => span::record_error(&span, e),
                Ok(_) => {}
            }
            event
        })))
    }
}

/// A model with settings of its own added to its [`ModelInfo`] (prices, limits); calls go to `inner`.
struct Described {
    inner: ChatModelRef,
    info: ModelInfo,
}

impl ChatModel for Described {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn chat(&self, request: ChatRequest) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send {
        self.inner.0.chat_dyn(request)
    }

    fn chat_stream(&self, request: ChatRequest) -> impl Future<Output = Result<ChatStream, ModelError>> + Send {
        self.inner.0.chat_stream_dyn(request)
    }

    fn turn_replayed(&self, request: &ChatRequest) {
        self.inner.turn_replayed(request);
    }

    fn prepare(&self) -> impl Future<Output = Result<(), ModelError>> + Send {
        self.inner.0.prepare_dyn()
    }

    fn choice(&self) -> Option<&ModelChoice<ChatModelRef>> {
        self.inner.choice()
    }
}

/// A model chosen per invocation ([`ChatModelRef::choosing`]): it answers nothing itself.
struct Chosen {
    choice: ModelChoice<ChatModelRef>,
    info: ModelInfo,
}

impl Chosen {
    fn unresolved(&self) -> ModelError {
        ModelError::InvalidRequest {
            server: self.info.server.clone(),
            model: self.choice.default_name().to_string(),
            message: format!(
                "the model is chosen per invocation among {}: it must be resolved over the state \
                 (`ChatModelRef::for_invocation`) before it is called",
                self.choice.names().join(", ")
            ),
        }
    }
}

impl ChatModel for Chosen {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn chat(&self, _request: ChatRequest) -> Result<ChatResponse, ModelError> {
        Err(self.unresolved())
    }

    async fn chat_stream(&self, _request: ChatRequest) -> Result<ChatStream, ModelError> {
        Err(self.unresolved())
    }

    async fn prepare(&self) -> Result<(), ModelError> {
        for (_, model) in self.choice.models() {
            model.prepare().await?;
        }
        Ok(())
    }

    fn choice(&self) -> Option<&ModelChoice<ChatModelRef>> {
        Some(&self.choice)
    }
}

impl<M: ChatModel> From<M> for ChatModelRef {
    fn from(model: M) -> Self {
        ChatModelRef::new(model)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A model that counts how often it was made ready.
    struct Counting {
        info: ModelInfo,
        prepared: Arc<AtomicUsize>,
    }

    impl ChatModel for Counting {
        fn info(&self) -> &ModelInfo {
            &self.info
        }

        async fn chat(&self, _request: ChatRequest) -> Result<ChatResponse, ModelError> {
            Err(ModelError::Unavailable { provider: "counting".into(), message: "no answers".into() })
        }

        async fn prepare(&self) -> Result<(), ModelError> {
            self.prepared.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[tokio::test]
    async fn preparing_a_model_with_prices_prepares_the_model_it_wraps() {
        let prepared = Arc::new(AtomicUsize::new(0));
        let info = ChatModel::info(&ScriptedModel::new(Vec::<&str>::new())).clone();
        let model = ChatModelRef::new(Counting { info, prepared: prepared.clone() })
            .with_prices(agentic_engine::budget::Prices::default());
        model.prepare().await.expect("prepared");
        assert_eq!(prepared.load(Ordering::SeqCst), 1);
        // A model with nothing to prepare is ready at once.
        ChatModelRef::new(ScriptedModel::new(["hi"])).prepare().await.expect("nothing to prepare");
    }
}
