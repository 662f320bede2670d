//! The `scripted` provider: canned replies in order, for tests and demos. Clones share the script and the
//! record of requests, so a test can keep a clone and inspect what the model was asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agentic_engine::TokenUsage;
use serde_json::Value;

use super::{ChatModel, ChatRequest, ChatResponse, FinishReason, ModelError, ModelInfo, TokenLogprob, ToolCall};
use crate::model::ChatMessage;

/// One canned reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScriptedReply {
    /// A text answer.
    Text(String),
    /// A text answer with the log-probabilities a provider reports when asked ([`ChatRequest::logprobs`]);
    /// the tokens must spell the text.
    Scored {
        /// The answer.
        text: String,
        /// Its tokens with their alternatives.
        logprobs: Vec<TokenLogprob>,
    },
    /// An answer calling tools.
    ToolCalls(Vec<ToolCall>),
    /// A failure, reported as [`ModelError::Unavailable`] with this message (to script provider errors).
    Error(String),
}

impl ScriptedReply {
    /// Reads a reply as the spec writes it: a JSON object `{"tool_calls": [{"name": .., "arguments": {..}}]}`
    /// (ids default to `call_<n>`) is a tool-call reply; anything else is text.
    pub fn parse(text: &str) -> Self {
        let trimmed = text.trim_start();
        if trimmed.starts_with('{')
            && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(trimmed)
            && map.len() == 1
            && let Some(Value::Array(calls)) = map.get("tool_calls")
        {
            let parsed: Option<Vec<ToolCall>> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let name = c.get("name")?.as_str()?.to_string();
                    let id =
                        c.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{}", i + 1), str::to_string);
                    let arguments = c.get("arguments").cloned().unwrap_or_else(|| Value::Object(Default::default()));
                    Some(ToolCall { id, name, arguments })
                })
                .collect();
            if let Some(calls) = parsed {
                return ScriptedReply::ToolCalls(calls);
            }
        }
        ScriptedReply::Text(text.to_string())
    }
}

impl From<&str> for ScriptedReply {
    fn from(text: &str) -> Self {
        ScriptedReply::parse(text)
    }
}

impl From<String> for ScriptedReply {
    fn from(text: String) -> Self {
        ScriptedReply::parse(&text)
    }
}

#[derive(Debug, Default)]
struct Script {
    replies: VecDeque<ScriptedReply>,
    used: usize,
    requests: Vec<ChatRequest>,
}

/// A chat model that answers with canned replies, in order, and records every request.
///
/// Token usage is deterministic: input = the number of whitespace-separated words in the request's messages,
/// output = the words of the reply. It does not support the JSON-schema response format (answers are parsed
/// leniently). When the replies are used up, every call fails with [`ModelError::ScriptExhausted`]
/// ("scripted model: no reply left (N used)").
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    script: Arc<Mutex<Script>>,
    info: Arc<ModelInfo>,
}

impl ScriptedModel {
    /// A model giving `replies` in order (strings are read with [`ScriptedReply::parse`]).
    pub fn new<R: Into<ScriptedReply>>(replies: impl IntoIterator<Item = R>) -> Self {
        let script = Script { replies: replies.into_iter().map(Into::into).collect(), ..Script::default() };
        ScriptedModel {
            script: Arc::new(Mutex::new(script)),
            info: Arc::new(ModelInfo {
                provider: "scripted".to_string(),
                server: "scripted".to_string(),
                model: "scripted".to_string(),
                json_schema: false,
                tools: true,
                prices: None,
                limits: Default::default(),
                name: None,
            }),
        }
    }

    /// Says whether the model honours JSON-schema answers and tool calls (default: no schema, tools): what an agent
    /// asks of it follows (a JSON-schema response format rather than the schema in the prompt), as for the
    /// model it stands in for.
    pub fn capabilities(mut self, json_schema: bool, tools: bool) -> Self {
        let mut info = (*self.info).clone();
        info.json_schema = json_schema;
        info.tools = tools;
        self.info = Arc::new(info);
        self
    }

    /// Names the model (default `scripted`), for error messages.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        let mut info = (*self.info).clone();
        info.model = name.into();
        self.info = Arc::new(info);
        self
    }

    /// Appends replies to the script.
    pub fn push<R: Into<ScriptedReply>>(&self, replies: impl IntoIterator<Item = R>) {
        crate::lock(&self.script).replies.extend(replies.into_iter().map(Into::into));
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        crate::lock(&self.script).requests.clone()
    }

    /// Replies given so far.
    pub fn used(&self) -> usize {
        crate::lock(&self.script).used
    }

    /// Replies left.
    pub fn remaining(&self) -> usize {
        crate::lock(&self.script).replies.len()
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

impl ChatModel for ScriptedModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let input = request.messages.iter().map(|m| words(m.text())).sum();
        let reply = {
            let mut s = crate::lock(&self.script);
            s.requests.push(request);
            let reply = s.replies.pop_front().ok_or(ModelError::ScriptExhausted { used: s.used })?;
            s.used += 1;
            reply
        };
        match reply {
            ScriptedReply::Text(text) => {
                let usage = TokenUsage { input, output: words(&text) };
                Ok(ChatResponse::text_reply(text, usage))
            }
            ScriptedReply::Scored { text, logprobs } => {
                let usage = TokenUsage { input, output: words(&text) };
                let mut response = ChatResponse::text_reply(text, usage);
                response.logprobs = Some(logprobs);
                Ok(response)
            }
            ScriptedReply::ToolCalls(calls) => {
                let output = calls.iter().map(|c| words(&c.arguments.to_string()) + 1).sum();
                Ok(ChatResponse {
                    message: ChatMessage::assistant_tool_calls(calls),
                    usage: TokenUsage { input, output },
                    finish_reason: FinishReason::ToolCalls,
                    logprobs: None,
                })
            }
            ScriptedReply::Error(message) => Err(ModelError::Unavailable { provider: "scripted".into(), message }),
        }
    }

    /// A replayed turn whose request this model was not asked in this process (another process answered
    /// it) uses up the reply that answered it there, so the next question gets the reply after it. A turn
    /// this process answered (a resume in the same process) used its reply already.
    fn turn_replayed(&self, request: &ChatRequest) {
        let mut s = crate::lock(&self.script);
        if !s.requests.contains(request) {
            s.replies.pop_front();
            s.used += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_turn_replayed_from_another_process_uses_up_its_reply_and_one_answered_here_does_not() {
        let first = ChatRequest::new(vec![ChatMessage::user("first")]);
        let second = ChatRequest::new(vec![ChatMessage::user("second")]);
        // A new process: the first turn was answered elsewhere.
        let m = ScriptedModel::new(["a", "b", "c"]);
        m.turn_replayed(&first);
        assert_eq!(m.chat(second.clone()).await.expect("b").text(), "b");
        // The same process: the first turn was answered here, then replayed (twice: two resumes).
        let m = ScriptedModel::new(["a", "b", "c"]);
        assert_eq!(m.chat(first.clone()).await.expect("a").text(), "a");
        m.turn_replayed(&first);
        m.turn_replayed(&first);
        assert_eq!(m.chat(second).await.expect("b").text(), "b");
        assert_eq!(m.used(), 2);
    }

    #[tokio::test]
    async fn replies_in_order_then_exhausted() {
        let m = ScriptedModel::new(["one two", r#"{"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}"#]);
        let r = m.chat(ChatRequest::new(vec![ChatMessage::user("hi there")])).await.expect("first");
        assert_eq!(r.text(), "one two");
        assert_eq!(r.usage, TokenUsage { input: 2, output: 2 });
        let r = m.chat(ChatRequest::new(vec![ChatMessage::user("again")])).await.expect("second");
        assert_eq!(r.tool_calls(), &[ToolCall::new("call_1", "add", json!({"a": 1}))]);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        let e = m.chat(ChatRequest::new(vec![])).await.expect_err("exhausted");
        assert_eq!(e.to_string(), "scripted model: no reply left (2 used)");
        assert_eq!(m.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_poisoned_script_keeps_every_update() {
        let m = ScriptedModel::new(["one"]);
        let script = m.script.clone();
        std::thread::spawn(move || {
            let _held = script.lock();
            panic!("poison the script");
        })
        .join()
        .expect_err("the holder panicked");
        assert!(m.script.is_poisoned());
        m.push(["two"]);
        assert_eq!(m.remaining(), 2);
        let r = m.chat(ChatRequest::new(vec![ChatMessage::user("hi")])).await.expect("first");
        assert_eq!(r.text(), "one");
        assert_eq!((m.used(), m.remaining(), m.requests().len()), (1, 1, 1));
    }
}
