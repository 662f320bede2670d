//! A2A (Agent2Agent protocol): the wire types of protocol 1.0 and 0.3 (shared with the server side), a small
//! typed JSON-RPC client of one remote agent ([`A2aClient`], over reqwest), and [`A2aAgent`], a remote agent as a non-AI agent of a workflow (the original's A2A client agent of
//! `langchain4j-agentic-a2a`).
//!
//! The client reads the remote agent's card (`/.well-known/agent-card.json` under the agent's base URL, or the
//! card URL given) and speaks the version it declares: 1.0 first (`SendMessage`, `SendStreamingMessage`,
//! `GetTask`, `CancelTask`, with the `A2A-Version: 1.0` header), 0.3 (`message/send`, …) when the card offers
//! only that. It was checked against the official Python SDK (`a2a-sdk` 1.3.0).
//!
//! Why not a crate: the Rust A2A crates reviewed (`a2a-rs`, `a2a-client`/`a2a-types`, `a2a-rust`, `ra2a`)
//! either sit on reqwest 0.12 (a second HTTP stack here), send the 0.3 method names with 1.0 objects, or
//! keep their JSON-RPC envelope private; none speaks both versions as the Python SDK does.

mod agent;
mod client;
mod types;

pub use agent::{A2aAgent, A2aAgentBuilder, A2aTenant};
pub use client::{A2aClient, A2aError, card_url, tenant_of_card_url};
pub use types::{
    AGENT_CARD_PATH, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, Endpoint, JSONRPC_BINDING,
    JsonRpcError, JsonRpcRequest, JsonRpcResponse, Message, Method, Part, ProtocolVersion, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskRequest, TaskState, TaskStatus, TaskStatusUpdateEvent, VERSION_HEADER, error_code, parts_text,
};
