//! The provider-neutral vocabulary of chat models: messages, tool calls, request options, responses and
//! stream events. Serialisable, so an LLM agent can keep a window of messages in the scope state.

use agentic_engine::TokenUsage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a conversation.
///
/// Serialised as `{"role": "system" | "user" | "assistant" | "tool", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ChatMessage {
    /// Instructions for the model.
    System {
        /// The text.
        content: String,
    },
    /// What the user says.
    User {
        /// The text.
        content: String,
    },
    /// The model's answer: text, tool calls, or both.
    Assistant {
        /// The text (empty when the model only called tools).
        #[serde(default)]
        content: String,
        /// The tools the model asked to call (default none).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, sent back to the model.
    Tool {
        /// The id of the [`ToolCall`] this answers.
        tool_call_id: String,
        /// The result (text; JSON results are sent as their JSON text).
        content: String,
    },
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage::System { content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::User { content: content.into() }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage::Assistant { content: content.into(), tool_calls: Vec::new() }
    }

    /// An assistant message calling tools.
    pub fn assistant_tool_calls(tool_calls: Vec<ToolCall>) -> Self {
        ChatMessage::Assistant { content: String::new(), tool_calls }
    }

    /// The result of tool call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage::Tool { tool_call_id: tool_call_id.into(), content: content.into() }
    }

    /// The message's text (the tool result for a tool message).
    pub fn text(&self) -> &str {
        match self {
            ChatMessage::System { content }
            | ChatMessage::User { content }
            | ChatMessage::Assistant { content, .. }
            | ChatMessage::Tool { content, .. } => content,
        }
    }

    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }

    /// The role as the OpenAI protocol names it.
    pub fn role(&self) -> &'static str {
        match self {
            ChatMessage::System { .. } => "system",
            ChatMessage::User { .. } => "user",
            ChatMessage::Assistant { .. } => "assistant",
            ChatMessage::Tool { .. } => "tool",
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the provider gave the call (tool results refer to it).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (a JSON object, as the model wrote it).
    pub arguments: Value,
}

impl ToolCall {
    /// A call of tool `name` with `arguments`, identified by `id`.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name (letters, digits, `_`, `-`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
}

impl ToolSpec {
    /// A tool named `name` described by `description`, taking arguments matching the JSON schema `parameters`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec { name: name.into(), description: description.into(), parameters }
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the providers' default when tools are given).
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// The format the model's answer must have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ResponseFormat {
    /// Free text (the default).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema {
        /// A name for the schema (letters, digits, `_`, `-`).
        name: String,
        /// The JSON schema.
        schema: Value,
        /// Ask the provider to enforce the schema exactly (OpenAI's `strict`).
        strict: bool,
    },
}

/// One chat request: messages plus options. Options left unset use the model's defaults.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature (default: the model's).
    pub temperature: Option<f64>,
    /// Most tokens to generate (default: the model's).
    pub max_tokens: Option<u32>,
    /// Stop sequences (default none).
    pub stop: Vec<String>,
    /// Tools the model may call (default none).
    pub tools: Vec<ToolSpec>,
    /// Tool choice (default: the provider's, i.e. auto when tools are given).
    pub tool_choice: Option<ToolChoice>,
    /// Answer format (default free text).
    pub response_format: Option<ResponseFormat>,
    /// Ask for token log-probabilities with this many most likely alternatives per token (default none:
    /// not asked). Providers that cannot report them ignore it; the answer's
    /// [`ChatResponse::logprobs`] is then `None`. OpenAI's `logprobs: true` with `top_logprobs: n` (0..=20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u8>,
}

impl ChatRequest {
    /// A request with `messages` and every option at its default.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        ChatRequest { messages, ..ChatRequest::default() }
    }

    /// Sets the temperature.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the most tokens to generate.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the stop sequences.
    pub fn stop(mut self, stop: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.stop = stop.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the tools.
    pub fn tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the tool choice.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets the answer format.
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// Asks for token log-probabilities with `top` alternatives per token (see [`ChatRequest::logprobs`]).
    pub fn logprobs(mut self, top: u8) -> Self {
        self.logprobs = Some(top);
        self
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural stop or a stop sequence.
    Stop,
    /// The token limit was reached.
    Length,
    /// The model called tools.
    ToolCalls,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else, as the provider said it (empty when it said nothing).
    Other(String),
}

impl FinishReason {
    /// The reason as the OpenAI protocol spells it (`stop`, `length`, `tool_calls`, `content_filter`), or the
    /// provider's own word.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }

    /// The reason for the OpenAI protocol's `finish_reason` string.
    pub fn from_openai(reason: Option<&str>) -> Self {
        match reason {
            Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other(String::new()),
        }
    }
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant message (text and/or tool calls).
    pub message: ChatMessage,
    /// Tokens used by the call.
    pub usage: TokenUsage,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The log-probability of every generated token of the text, in order, when the request asked for them
    /// ([`ChatRequest::logprobs`]) and the provider reported them; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// One generated token with its log-probability and the most likely alternatives at its position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its natural log-probability (≤ 0).
    pub logprob: f64,
    /// The most likely tokens at this position (the token itself usually among them), most likely first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<TopLogprob>,
}

/// An alternative token at one position of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// Its natural log-probability (≤ 0).
    pub logprob: f64,
}

impl ChatResponse {
    /// A text answer that stopped normally.
    pub fn text_reply(text: impl Into<String>, usage: TokenUsage) -> Self {
        ChatResponse { message: ChatMessage::assistant(text), usage, finish_reason: FinishReason::Stop, logprobs: None }
    }

    /// The answer's text.
    pub fn text(&self) -> &str {
        self.message.text()
    }

    /// The tool calls of the answer.
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.message.tool_calls()
    }
}

/// One event of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// A piece of the answer's text.
    Token(String),
    /// A piece of a tool call: `index` identifies the call within the answer; `id` and `name` come with the
    /// first piece, `arguments` is a fragment of the arguments' JSON text.
    ToolCallDelta {
        /// Position of the call in the answer.
        index: usize,
        /// The call's id (first piece only).
        id: Option<String>,
        /// The tool's name (first piece only).
        name: Option<String>,
        /// A fragment of the arguments' JSON text.
        arguments: String,
    },
    /// The complete answer, assembled from the pieces: always the last event.
    Done(ChatResponse),
}
