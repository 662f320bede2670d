//! The A2A wire types: the objects of protocol 1.0 as the official SDKs put them on the wire (the protobuf
//! JSON mapping of `a2a.proto`: camelCase fields, `ROLE_USER`, `TASK_STATE_COMPLETED`, a part as
//! `{"text": ..}`, a send result as `{"task": ..}` or `{"message": ..}`), and the JSON-RPC envelope.
//!
//! Every type reads both versions: the 0.3 spellings (`"user"`, `"input-required"`, parts as
//! `{"kind": "text", ..}`, results tagged by `kind`) are accepted where they differ. Each writes 1.0 by
//! default; the `to_v0_3` methods and [`SendMessageResponse::to_wire`] / [`StreamResponse::to_wire`] write
//! 0.3 for older peers, as the Python SDK's compatibility layer does. Unknown fields are ignored when read (the
//! card keeps them, so that a card read and written again loses nothing).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Where an agent's card is served, relative to its base URL.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// The HTTP header naming the protocol version of a request (`A2A-Version: 1.0`); a request without it is
/// taken as 0.3 by the Python SDK's server.
pub const VERSION_HEADER: &str = "A2A-Version";

/// The JSON-RPC transport's name in a card's interfaces (`protocolBinding`).
pub const JSONRPC_BINDING: &str = "JSONRPC";

/// A version of the A2A protocol this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 1.0: the methods `SendMessage`, `GetTask`, …; the default.
    #[default]
    V1_0,
    /// 0.3: the methods `message/send`, `tasks/get`, …
    V0_3,
}

impl ProtocolVersion {
    /// `"1.0"` or `"0.3"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V1_0 => "1.0",
            ProtocolVersion::V0_3 => "0.3",
        }
    }

    /// The version a card declares (`"1.0"`, `"1.0.0"`, `"0.3.0"`): 1.x is 1.0, 0.3 up to 1.0 is 0.3;
    /// `None` for anything else (older or not a version).
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        let mut it = s.trim().split('.');
        let major: u64 = it.next()?.parse().ok()?;
        let minor: u64 = it.next().map_or(Some(0), |m| m.parse().ok())?;
        match (major, minor) {
            (1.., _) => Some(ProtocolVersion::V1_0),
            (0, 3..) => Some(ProtocolVersion::V0_3),
            _ => None,
        }
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The A2A methods this crate sends (and a server serves), with their names in each version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// `SendMessage` (0.3: `message/send`): a message, answered with a task or a message.
    SendMessage,
    /// `SendStreamingMessage` (0.3: `message/stream`): a message, answered with a stream of events.
    SendStreamingMessage,
    /// `GetTask` (0.3: `tasks/get`).
    GetTask,
    /// `CancelTask` (0.3: `tasks/cancel`).
    CancelTask,
}

impl Method {
    const ALL: [Method; 4] = [Method::SendMessage, Method::SendStreamingMessage, Method::GetTask, Method::CancelTask];

    /// The method's name in `version`.
    pub fn name(self, version: ProtocolVersion) -> &'static str {
        match (self, version) {
            (Method::SendMessage, ProtocolVersion::V1_0) => "SendMessage",
            (Method::SendStreamingMessage, ProtocolVersion::V1_0) => "SendStreamingMessage",
            (Method::GetTask, ProtocolVersion::V1_0) => "GetTask",
            (Method::CancelTask, ProtocolVersion::V1_0) => "CancelTask",
            (Method::SendMessage, ProtocolVersion::V0_3) => "message/send",
            (Method::SendStreamingMessage, ProtocolVersion::V0_3) => "message/stream",
            (Method::GetTask, ProtocolVersion::V0_3) => "tasks/get",
            (Method::CancelTask, ProtocolVersion::V0_3) => "tasks/cancel",
        }
    }

    /// The method a request names, with the version its name belongs to (`"tasks/get"` → `GetTask`, 0.3).
    pub fn from_name(name: &str) -> Option<(Method, ProtocolVersion)> {
        [ProtocolVersion::V1_0, ProtocolVersion::V0_3]
            .into_iter()
            .find_map(|v| Method::ALL.into_iter().find(|m| m.name(v) == name).map(|m| (m, v)))
    }
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Role {
    /// Not given.
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    /// The client (0.3: `user`).
    #[serde(rename = "ROLE_USER", alias = "user")]
    User,
    /// The remote agent (0.3: `agent`).
    #[serde(rename = "ROLE_AGENT", alias = "agent")]
    Agent,
}

impl Role {
    fn v0_3(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::User | Role::Unspecified => "user",
        }
    }
}

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum TaskState {
    /// Not given (0.3: `unknown`).
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED", alias = "unknown")]
    Unspecified,
    /// Received, not started.
    #[serde(rename = "TASK_STATE_SUBMITTED", alias = "submitted")]
    Submitted,
    /// Being worked on.
    #[serde(rename = "TASK_STATE_WORKING", alias = "working")]
    Working,
    /// Done (terminal).
    #[serde(rename = "TASK_STATE_COMPLETED", alias = "completed")]
    Completed,
    /// Failed (terminal).
    #[serde(rename = "TASK_STATE_FAILED", alias = "failed")]
    Failed,
    /// Cancelled (terminal).
    #[serde(rename = "TASK_STATE_CANCELED", alias = "canceled", alias = "cancelled")]
    Canceled,
    /// Waits for the client's next message (interrupted; open).
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED", alias = "input-required")]
    InputRequired,
    /// Refused by the agent (terminal).
    #[serde(rename = "TASK_STATE_REJECTED", alias = "rejected")]
    Rejected,
    /// Waits for the client to authenticate (interrupted; open).
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED", alias = "auth-required")]
    AuthRequired,
}

impl TaskState {
    /// Completed, failed, cancelled or rejected: the task takes no more messages.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
    }

    /// Input or authentication required: the task waits for the client's next message.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// The state's 0.3 name (`input-required`).
    pub fn v0_3(self) -> &'static str {
        match self {
            TaskState::Unspecified => "unknown",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::InputRequired => "input-required",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }
}

impl std::fmt::Display for TaskState {
    /// The 0.3 name, which reads well in messages (`input-required`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.v0_3())
    }
}

/// One piece of content: text, a file (inline `raw` bytes in base64, or a `url`), or structured `data`.
/// 0.3's `{"kind": "text"|"file"|"data", ..}` parts are read into the same fields.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "PartWire")]
pub struct Part {
    /// Text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// File content, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// File content by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Structured content (any JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The content's media type (`text/plain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// A part as either version writes it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartWire {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    raw: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    filename: Option<String>,
    #[serde(default)]
    media_type: Option<String>,
    /// 0.3: `{bytes | uri, mimeType, name}`.
    #[serde(default)]
    file: Option<FileWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileWire {
    #[serde(default)]
    bytes: Option<String>,
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

impl From<PartWire> for Part {
    fn from(w: PartWire) -> Part {
        let mut p = Part {
            text: w.text,
            raw: w.raw,
            url: w.url,
            data: w.data,
            metadata: w.metadata,
            filename: w.filename,
            media_type: w.media_type,
        };
        if let Some(f) = w.file {
            p.raw = p.raw.or(f.bytes);
            p.url = p.url.or(f.uri);
            p.media_type = p.media_type.or(f.mime_type);
            p.filename = p.filename.or(f.name);
        }
        p
    }
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part { text: Some(text.into()), ..Part::default() }
    }

    /// A structured data part.
    pub fn data(data: Value) -> Part {
        Part { data: Some(data), ..Part::default() }
    }

    /// The part as 0.3 writes it (`{"kind": "text", "text": ..}`; data that is not an object is wrapped as
    /// `{"value": ..}`, since 0.3 data parts hold objects).
    pub fn to_v0_3(&self) -> Value {
        let mut out = Map::new();
        if let Some(text) = &self.text {
            out.insert("kind".into(), json!("text"));
            out.insert("text".into(), json!(text));
        } else if let Some(data) = &self.data {
            out.insert("kind".into(), json!("data"));
            let data = if data.is_object() { data.clone() } else { json!({ "value": data }) };
            out.insert("data".into(), data);
        } else {
            let mut file = Map::new();
            if let Some(raw) = &self.raw {
                file.insert("bytes".into(), json!(raw));
            }
            if let Some(url) = &self.url {
                file.insert("uri".into(), json!(url));
            }
            if let Some(m) = &self.media_type {
                file.insert("mimeType".into(), json!(m));
            }
            if let Some(n) = &self.filename {
                file.insert("name".into(), json!(n));
            }
            out.insert("kind".into(), json!("file"));
            out.insert("file".into(), Value::Object(file));
        }
        if let Some(m) = &self.metadata {
            out.insert("metadata".into(), Value::Object(m.clone()));
        }
        Value::Object(out)
    }
}

/// The text of `parts`: their text parts concatenated (a streamed answer arrives as appended chunks), data
/// parts as compact JSON.
pub fn parts_text(parts: &[Part]) -> String {
    let mut out = String::new();
    for p in parts {
        if let Some(t) = &p.text {
            out.push_str(t);
        } else if let Some(d) = &p.data {
            out.push_str(&d.to_string());
        }
    }
    out
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The sender's id for the message (a UUID).
    pub message_id: String,
    /// The conversation it belongs to (set by the server when a client leaves it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task it continues (none: a new task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who sent it.
    #[serde(default)]
    pub role: Role,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// URIs of the extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Other tasks it refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// A user message holding `text`, with a new message id.
    pub fn user_text(text: impl Into<String>) -> Message {
        Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::User,
            parts: vec![Part::text(text)],
            ..Message::default()
        }
    }

    /// The message's text ([`parts_text`]).
    pub fn text(&self) -> String {
        parts_text(&self.parts)
    }

    /// The message as 0.3 writes it.
    pub fn to_v0_3(&self) -> Value {
        let mut v = to_object(self);
        v.insert("kind".into(), json!("message"));
        v.insert("role".into(), json!(self.role.v0_3()));
        v.insert("parts".into(), Value::Array(self.parts.iter().map(Part::to_v0_3).collect()));
        Value::Object(v)
    }
}

/// Where a task stands.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// Its state.
    #[serde(default)]
    pub state: TaskState,
    /// What the agent said with it (the question of `input-required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl TaskStatus {
    /// The status as 0.3 writes it.
    pub fn to_v0_3(&self) -> Value {
        let mut v = to_object(self);
        v.insert("state".into(), json!(self.state.v0_3()));
        if let Some(m) = &self.message {
            v.insert("message".into(), m.to_v0_3());
        }
        Value::Object(v)
    }
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Its id within the task.
    #[serde(default)]
    pub artifact_id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// URIs of the extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

impl Artifact {
    /// The artifact's text ([`parts_text`]).
    pub fn text(&self) -> String {
        parts_text(&self.parts)
    }

    /// The artifact as 0.3 writes it.
    pub fn to_v0_3(&self) -> Value {
        let mut v = to_object(self);
        v.insert("parts".into(), Value::Array(self.parts.iter().map(Part::to_v0_3).collect()));
        Value::Object(v)
    }
}

/// A unit of work of a remote agent, within a context (conversation).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Its id (set by the server).
    pub id: String,
    /// The conversation it belongs to.
    #[serde(default)]
    pub context_id: String,
    /// Where it stands.
    #[serde(default)]
    pub status: TaskStatus,
    /// Its outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The messages exchanged in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl Task {
    /// The task's answer: its artifacts' text (one line per artifact), else the text of its status message,
    /// else of the agent's last message in its history; `None` when it has none of them.
    pub fn answer(&self) -> Option<String> {
        let artifacts: Vec<String> = self.artifacts.iter().map(Artifact::text).filter(|t| !t.is_empty()).collect();
        if !artifacts.is_empty() {
            return Some(artifacts.join("\n"));
        }
        if let Some(m) = &self.status.message {
            return Some(m.text());
        }
        self.history.iter().rev().find(|m| m.role == Role::Agent).map(Message::text)
    }

    /// The task as 0.3 writes it.
    pub fn to_v0_3(&self) -> Value {
        let mut v = to_object(self);
        v.insert("kind".into(), json!("task"));
        v.insert("status".into(), self.status.to_v0_3());
        if !self.artifacts.is_empty() {
            v.insert("artifacts".into(), Value::Array(self.artifacts.iter().map(Artifact::to_v0_3).collect()));
        }
        if !self.history.is_empty() {
            v.insert("history".into(), Value::Array(self.history.iter().map(Message::to_v0_3).collect()));
        }
        Value::Object(v)
    }
}

/// A streamed change of a task's status.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    #[serde(default)]
    pub context_id: String,
    /// The new status.
    #[serde(default)]
    pub status: TaskStatus,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl TaskStatusUpdateEvent {
    /// The event as 0.3 writes it (`kind: status-update`, with `final` set for a terminal or interrupted
    /// state).
    pub fn to_v0_3(&self) -> Value {
        let mut v = to_object(self);
        v.insert("kind".into(), json!("status-update"));
        v.insert("status".into(), self.status.to_v0_3());
        v.insert("final".into(), json!(self.status.state.is_terminal() || self.status.state.is_interrupted()));
        Value::Object(v)
    }
}

/// A streamed artifact or chunk of one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    #[serde(default)]
    pub context_id: String,
    /// The artifact, or the chunk to append to it.
    #[serde(default)]
    pub artifact: Artifact,
    /// Whether the parts append to the artifact of the same id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// Whether this is the artifact's last chunk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl TaskArtifactUpdateEvent {
    /// The event as 0.3 writes it (`kind: artifact-update`).
    pub fn to_v0_3(&self) -> Value {
        let mut v = to_object(self);
        v.insert("kind".into(), json!("artifact-update"));
        v.insert("artifact".into(), self.artifact.to_v0_3());
        Value::Object(v)
    }
}

/// One of an agent's transports, as its card lists it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    /// Where to send requests.
    pub url: String,
    /// `JSONRPC`, `HTTP+JSON` or `GRPC`.
    #[serde(default)]
    pub protocol_binding: String,
    /// The tenant to name in requests, when the interface serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The protocol version it speaks (`1.0`, `0.3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
}

/// What an agent can do beyond the basics.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// Whether it answers `SendStreamingMessage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Whether it sends push notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    /// Whether it has an extended card for authenticated clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_agent_card: Option<bool>,
    /// Other fields (extensions), kept as they are.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One skill a card advertises.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Its id.
    #[serde(default)]
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Keywords.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Example requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Other fields (input/output modes, security), kept as they are.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// An agent's self-description, served at [`AGENT_CARD_PATH`]. Reads 1.0 cards (`supportedInterfaces`) and
/// 0.3 cards (`url`, `protocolVersion`, `preferredTransport`, `additionalInterfaces`); the Python SDK serves
/// both sets of fields.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// The agent's name.
    pub name: String,
    /// What it does (the description of an agent that calls it).
    #[serde(default)]
    pub description: String,
    /// Its transports (1.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_interfaces: Vec<AgentInterface>,
    /// Its version.
    #[serde(default)]
    pub version: String,
    /// Optional capabilities.
    #[serde(default)]
    pub capabilities: AgentCapabilities,
    /// Media types it accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_input_modes: Vec<String>,
    /// Media types it produces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_output_modes: Vec<String>,
    /// Its skills.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<AgentSkill>,
    /// 0.3: the main endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// 0.3: the protocol version of [`AgentCard::url`] (absent: 0.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// 0.3: the transport of [`AgentCard::url`] (absent: `JSONRPC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    /// Other fields (provider, security schemes, signatures, 0.3's additional interfaces), kept as they are.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The JSON-RPC endpoint an agent's card offers: where, in which version, and the tenant of its interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Where to post requests.
    pub url: String,
    /// The version to speak there.
    pub version: ProtocolVersion,
    /// The interface's tenant, if it names one.
    pub tenant: Option<String>,
}

impl AgentCard {
    /// The card's JSON-RPC endpoint, chosen as the Python SDK's client chooses: a 1.0 interface first, else a
    /// later 1.x, else 0.3 or later, else one without a version (taken as 1.0); a card without
    /// `supportedInterfaces` offers its 0.3 `url` (version `protocolVersion`, default 0.3). `None` when the
    /// card offers no JSON-RPC endpoint in a version spoken here.
    pub fn jsonrpc_endpoint(&self) -> Option<Endpoint> {
        if self.supported_interfaces.is_empty() {
            let url = self.url.clone().filter(|u| !u.is_empty())?;
            let transport = self.preferred_transport.as_deref().unwrap_or(JSONRPC_BINDING);
            let version = ProtocolVersion::parse(self.protocol_version.as_deref().unwrap_or("0.3"))?;
            return (transport == JSONRPC_BINDING).then_some(Endpoint { url, version, tenant: None });
        }
        let candidates = self.supported_interfaces.iter().filter(|i| i.protocol_binding == JSONRPC_BINDING);
        let rank = |i: &AgentInterface| match i.protocol_version.as_deref().filter(|v| !v.is_empty()) {
            None => Some((3, ProtocolVersion::V1_0)),
            Some(v) => {
                let exact = v == "1.0" || v.starts_with("1.0.");
                match ProtocolVersion::parse(v)? {
                    ProtocolVersion::V1_0 if exact => Some((0, ProtocolVersion::V1_0)),
                    ProtocolVersion::V1_0 => Some((1, ProtocolVersion::V1_0)),
                    ProtocolVersion::V0_3 => Some((2, ProtocolVersion::V0_3)),
                }
            }
        };
        let best = candidates.filter_map(|i| rank(i).map(|r| (r, i))).min_by_key(|((order, _), _)| *order)?;
        let ((_, version), i) = best;
        Some(Endpoint { url: i.url.clone(), version, tenant: i.tenant.clone().filter(|t| !t.is_empty()) })
    }

    /// Whether the agent answers `SendStreamingMessage`.
    pub fn streams(&self) -> bool {
        self.capabilities.streaming == Some(true)
    }
}

/// How to send a message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// Media types the client accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    /// How many messages of the history to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Answer at once with the task instead of waiting for it to end or be interrupted (0.3: the opposite of
    /// `blocking`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_immediately: Option<bool>,
}

/// The parameters of `SendMessage` and `SendStreamingMessage` (0.3: `MessageSendParams`, without tenant).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// The tenant the message is for (1.0 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The message.
    pub message: Message,
    /// How to send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl SendMessageRequest {
    /// The parameters as `version` writes them.
    pub fn to_wire(&self, version: ProtocolVersion) -> Value {
        match version {
            ProtocolVersion::V1_0 => serde_json::to_value(self).unwrap_or(Value::Null),
            ProtocolVersion::V0_3 => {
                let mut v = Map::new();
                v.insert("message".into(), self.message.to_v0_3());
                if let Some(c) = &self.configuration {
                    let mut c03 = to_object(c);
                    if let Some(Value::Bool(now)) = c03.remove("returnImmediately") {
                        c03.insert("blocking".into(), json!(!now));
                    }
                    v.insert("configuration".into(), Value::Object(c03));
                }
                if let Some(m) = &self.metadata {
                    v.insert("metadata".into(), Value::Object(m.clone()));
                }
                Value::Object(v)
            }
        }
    }
}

/// The parameters of `GetTask` (0.3: `tasks/get`) and, without `history_length`, of `CancelTask`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRequest {
    /// The tenant (1.0 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The task's id.
    pub id: String,
    /// How many messages of the history to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

impl TaskRequest {
    /// The parameters as `version` writes them (0.3 has no tenant).
    pub fn to_wire(&self, version: ProtocolVersion) -> Value {
        let mut v = to_object(self);
        if version == ProtocolVersion::V0_3 {
            v.remove("tenant");
        }
        Value::Object(v)
    }
}

/// The result of `SendMessage`: the task it started or continued, or a direct message. 1.0 writes
/// `{"task": ..}` or `{"message": ..}`; 0.3 the object itself, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::large_enum_variant)]
pub enum SendMessageResponse {
    /// A task.
    Task(Task),
    /// A message.
    Message(Message),
}

impl SendMessageResponse {
    /// Reads a result written in `version`.
    ///
    /// # Errors
    /// The value is not a task or a message.
    pub fn from_wire(value: Value, version: ProtocolVersion) -> Result<Self, serde_json::Error> {
        match version {
            ProtocolVersion::V1_0 => serde_json::from_value(value),
            ProtocolVersion::V0_3 => match kind_of(&value) {
                "message" => serde_json::from_value(value).map(SendMessageResponse::Message),
                _ => serde_json::from_value(value).map(SendMessageResponse::Task),
            },
        }
    }

    /// The result as `version` writes it.
    pub fn to_wire(&self, version: ProtocolVersion) -> Value {
        match (version, self) {
            (ProtocolVersion::V1_0, _) => serde_json::to_value(self).unwrap_or(Value::Null),
            (ProtocolVersion::V0_3, SendMessageResponse::Task(t)) => t.to_v0_3(),
            (ProtocolVersion::V0_3, SendMessageResponse::Message(m)) => m.to_v0_3(),
        }
    }
}

/// One event of `SendStreamingMessage`. 1.0 writes `{"task"|"message"|"statusUpdate"|"artifactUpdate": ..}`;
/// 0.3 the object itself, tagged by `kind` (`task`, `message`, `status-update`, `artifact-update`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::large_enum_variant)]
pub enum StreamResponse {
    /// The task (first event, or a snapshot).
    Task(Task),
    /// A direct message (the only event).
    Message(Message),
    /// A status change.
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact or a chunk of one.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// Reads an event written in `version`.
    ///
    /// # Errors
    /// The value is none of the four events.
    pub fn from_wire(value: Value, version: ProtocolVersion) -> Result<Self, serde_json::Error> {
        match version {
            ProtocolVersion::V1_0 => serde_json::from_value(value),
            ProtocolVersion::V0_3 => match kind_of(&value) {
                "message" => serde_json::from_value(value).map(StreamResponse::Message),
                "status-update" => serde_json::from_value(value).map(StreamResponse::StatusUpdate),
                "artifact-update" => serde_json::from_value(value).map(StreamResponse::ArtifactUpdate),
                _ => serde_json::from_value(value).map(StreamResponse::Task),
            },
        }
    }

    /// The event as `version` writes it.
    pub fn to_wire(&self, version: ProtocolVersion) -> Value {
        match (version, self) {
            (ProtocolVersion::V1_0, _) => serde_json::to_value(self).unwrap_or(Value::Null),
            (ProtocolVersion::V0_3, StreamResponse::Task(t)) => t.to_v0_3(),
            (ProtocolVersion::V0_3, StreamResponse::Message(m)) => m.to_v0_3(),
            (ProtocolVersion::V0_3, StreamResponse::StatusUpdate(e)) => e.to_v0_3(),
            (ProtocolVersion::V0_3, StreamResponse::ArtifactUpdate(e)) => e.to_v0_3(),
        }
    }
}

/// A 0.3 object's `kind`, guessed from its fields when absent (as the Python SDK does for old servers).
fn kind_of(v: &Value) -> &str {
    match v.get("kind").and_then(Value::as_str) {
        Some(k) => k,
        None if v.get("messageId").is_some() => "message",
        None if v.get("artifact").is_some() => "artifact-update",
        None if v.get("taskId").is_some() => "status-update",
        None => "task",
    }
}

fn to_object<T: Serialize>(t: &T) -> Map<String, Value> {
    match serde_json::to_value(t) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// A JSON-RPC 2.0 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcRequest<P = Value> {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The request id (a string or a number), echoed by the response.
    #[serde(default)]
    pub id: Value,
    /// The method ([`Method::name`]).
    pub method: String,
    /// Its parameters.
    pub params: P,
}

impl<P> JsonRpcRequest<P> {
    /// A request of `method` with `params`, with a new id.
    pub fn new(method: impl Into<String>, params: P) -> Self {
        JsonRpcRequest {
            jsonrpc: "2.0".into(),
            id: Value::String(uuid::Uuid::new_v4().to_string()),
            method: method.into(),
            params,
        }
    }
}

/// A JSON-RPC 2.0 response: a result or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcResponse<R = Value> {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The request's id.
    #[serde(default)]
    pub id: Value,
    /// The result, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<R>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<JsonRpcError>,
}

impl<R> JsonRpcResponse<R> {
    /// A success answering request `id`.
    pub fn success(id: Value, result: R) -> Self {
        JsonRpcResponse { jsonrpc: "2.0".into(), id, result: Some(result), error: None }
    }

    /// A failure answering request `id`.
    pub fn failure(id: Value, error: JsonRpcError) -> Self {
        JsonRpcResponse { jsonrpc: "2.0".into(), id, result: None, error: Some(error) }
    }
}

/// A JSON-RPC error: its code ([`error_code`]), message and data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    /// The code.
    pub code: i64,
    /// What went wrong.
    #[serde(default)]
    pub message: String,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The JSON-RPC error codes of A2A (the SDKs' `JSON_RPC_ERROR_CODE_MAP`) and of JSON-RPC itself.
pub mod error_code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The body is not a JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The parameters do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// No such task.
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// The task cannot be cancelled (it ended).
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// Push notifications are not supported.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// The operation is not supported.
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// A media type is not supported.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// The agent's answer is invalid.
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    /// No extended card is configured.
    pub const EXTENDED_AGENT_CARD_NOT_CONFIGURED: i64 = -32007;
    /// The protocol version of the request (its `A2A-Version` header) is not served.
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_1_0_task_reads_and_writes_back_and_as_0_3() {
        let wire = json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "m", "role": "ROLE_AGENT",
                "parts": [{"text": "Which city?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "HEL"}, {"text": "LO"}]}]}});
        let r = SendMessageResponse::from_wire(wire.clone(), ProtocolVersion::V1_0).unwrap();
        let SendMessageResponse::Task(t) = &r else { panic!("a task") };
        assert_eq!(t.status.state, TaskState::InputRequired);
        assert_eq!(t.answer().as_deref(), Some("HELLO"));
        assert_eq!(r.to_wire(ProtocolVersion::V1_0), wire);
        let old = r.to_wire(ProtocolVersion::V0_3);
        assert_eq!(old["kind"], "task");
        assert_eq!(old["status"]["state"], "input-required");
        assert_eq!(old["status"]["message"]["role"], "agent");
        assert_eq!(old["artifacts"][0]["parts"][0], json!({"kind": "text", "text": "HEL"}));
        assert_eq!(SendMessageResponse::from_wire(old, ProtocolVersion::V0_3).unwrap(), r);
    }

    #[test]
    fn versions_methods_and_endpoints() {
        assert_eq!(ProtocolVersion::parse("1.0.0"), Some(ProtocolVersion::V1_0));
        assert_eq!(ProtocolVersion::parse("0.3"), Some(ProtocolVersion::V0_3));
        assert_eq!(ProtocolVersion::parse("0.2.5"), None);
        assert_eq!(Method::from_name("tasks/get"), Some((Method::GetTask, ProtocolVersion::V0_3)));
        assert_eq!(Method::from_name("SendMessage"), Some((Method::SendMessage, ProtocolVersion::V1_0)));
        let card: AgentCard = serde_json::from_value(json!({"name": "x", "supportedInterfaces": [
            {"url": "http://h/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://h/new", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t"},
            {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
            "url": "http://h/old", "protocolVersion": "0.3", "provider": {"organization": "o"}}))
        .unwrap();
        let e = card.jsonrpc_endpoint().unwrap();
        assert_eq!(
            (e.url.as_str(), e.version, e.tenant.as_deref()),
            ("http://h/new", ProtocolVersion::V1_0, Some("t"))
        );
        assert_eq!(serde_json::to_value(&card).unwrap()["provider"], json!({"organization": "o"}));
        let legacy: AgentCard = serde_json::from_value(json!({"name": "x", "url": "http://h/"})).unwrap();
        assert_eq!(legacy.jsonrpc_endpoint().unwrap().version, ProtocolVersion::V0_3);
    }
}
